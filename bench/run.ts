/**
 * `npm run bench` runs every benchmark; `npm run bench -- users-by-email token-grants` runs those.
 * When import and users-by-email both run, users-by-email serves the database import filled.
 */
import os from 'node:os';
import type { BenchContext } from './lib.ts';
import * as accessLog from './access-log.ts';
import * as apiReference from './api-reference.ts';
import * as deliveries from './deliveries.ts';
import * as embedded from './embedded.ts';
import * as growth from './growth.ts';
import * as importBench from './import.ts';
import * as importJob from './import-job.ts';
import * as soak from './soak.ts';
import * as startup from './startup.ts';
import * as tokenGrants from './token-grants.ts';
import * as usersByEmail from './users-by-email.ts';

const benchmarks: Record<string, (context: BenchContext) => Promise<void>> = {
  import: importBench.run,
  'import-job': importJob.run,
  'users-by-email': usersByEmail.run,
  'token-grants': tokenGrants.run,
  'delivery-throughput': deliveries.throughput,
  'delivery-latency': deliveries.latency,
  redelivery: deliveries.redelivery,
  'claim-growth': deliveries.claimGrowth,
  'stats-growth': deliveries.statsGrowth,
  'deletion-stall': deliveries.deletionStall,
  startup: startup.run,
  embedded: embedded.run,
  'api-reference': apiReference.run,
  'access-log': accessLog.run,
  soak: soak.run,
  growth: growth.run,
};

const requested = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const unknown = requested.filter((name) => !(name in benchmarks));
if (unknown.length > 0) {
  process.stderr.write(`Unknown benchmark(s): ${unknown.join(', ')}. Known: ${Object.keys(benchmarks).join(', ')}\n`);
  process.exit(2);
}
// The soak runs half an hour, growth seeds 10M users: only when asked for by name.
const onRequestOnly = new Set(['soak', 'growth']);
const names = Object.keys(benchmarks).filter((name) =>
  requested.length === 0 ? !onRequestOnly.has(name) : requested.includes(name),
);
const context: BenchContext = { keepSeeded: names.includes('import') && names.includes('users-by-email') };

const cpus = os.cpus();
process.stdout.write(
  `Tenantry benchmarks — ${new Date().toISOString()}, Node ${process.version}, ${cpus.length} × ${cpus[0]?.model ?? 'cpu'}, ${os.platform()} ${os.release()}\n`,
);
const started = performance.now();
let failed = false;
for (const name of names) {
  process.stdout.write(`\n## ${name}\n`);
  const at = performance.now();
  // Other work on the machine skews every figure: the load average is printed before and after.
  process.stdout.write(
    `  load average before: ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}\n`,
  );
  try {
    await benchmarks[name]!(context);
  } catch (error) {
    failed = true;
    process.stdout.write(`  FAILED: ${error instanceof Error ? error.stack : String(error)}\n`);
  }
  process.stdout.write(
    `  load average after: ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}\n`,
  );
  process.stdout.write(`  (${name} took ${((performance.now() - at) / 1000).toFixed(0)} s)\n`);
}
context.seeded?.remove();
process.stdout.write(`\nAll done in ${((performance.now() - started) / 1000).toFixed(0)} s\n`);
process.exit(failed ? 1 : 0);
