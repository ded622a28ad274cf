/**
 * `npm run chaos` runs every fault-injection scenario at full size on SQLite, and on PostgreSQL too
 * when TEST_DATABASE_URL is set; `npm run chaos -- sigkill outage` runs those whose names contain a
 * word given. Prints a table; exits 1 when an event was lost or a scenario failed.
 */
import os from 'node:os';
import { LONG, scenarios, type ChaosResult } from './scenarios.ts';
import type { Kind } from './rig.ts';

/** The whole run stops here, whatever is left. */
const RUN_DEADLINE_MS = 10 * 60_000;

const words = process.argv
  .slice(2)
  .filter((a) => !a.startsWith('-'))
  .map((w) => w.toLowerCase());
const kinds: Kind[] = process.env.TEST_DATABASE_URL ? ['sqlite', 'postgres'] : ['sqlite'];
const started = Date.now();
const cpus = os.cpus();
const machine = `${cpus.length} × ${cpus[0]?.model ?? 'cpu'}`;
process.stdout.write(`Tenantry chaos — ${new Date().toISOString()}, Node ${process.version}, ${machine}\n`);
process.stdout.write(
  `${LONG.users} users per scenario, ${LONG.parallel} at a time; databases: ${kinds.join(', ')}\n\n`,
);
if (!process.env.TEST_DATABASE_URL)
  process.stdout.write('(TEST_DATABASE_URL is not set: PostgreSQL scenarios skipped)\n\n');

const rows: ChaosResult[] = [];
let failed = false;
for (const kind of kinds) {
  for (const scenario of scenarios) {
    if (!scenario.databases.includes(kind)) continue;
    if (words.length > 0 && !words.some((w) => scenario.name.toLowerCase().includes(w))) continue;
    const label = `${scenario.name} (${kind})`;
    const reason = scenario.unavailable?.();
    if (reason) {
      process.stdout.write(`- ${label}: skipped, ${reason}\n`);
      continue;
    }
    if (Date.now() - started > RUN_DEADLINE_MS) {
      process.stdout.write(`- ${label}: not run, the run's ${RUN_DEADLINE_MS / 60_000} minutes are up\n`);
      failed = true;
      continue;
    }
    try {
      const row = await scenario.run(kind, LONG);
      rows.push(row);
      if (row.lost > 0) failed = true;
      const counts = `${row.created} created, ${row.delivered} delivered, ${row.lost} lost, ${row.duplicated} duplicated`;
      process.stdout.write(`- ${label}: ${counts}, ${row.seconds.toFixed(1)} s\n`);
      for (const note of row.notes) process.stdout.write(`    ${note}\n`);
    } catch (error) {
      failed = true;
      process.stdout.write(`- ${label}: FAILED ${error instanceof Error ? error.stack : String(error)}\n`);
    }
  }
}

process.stdout.write(
  '\n| scenario | database | created | delivered | lost | duplicated | time |\n|---|---|---:|---:|---:|---:|---:|\n',
);
for (const row of rows) {
  const cells = [
    row.scenario,
    row.database,
    row.created,
    row.delivered,
    row.lost,
    row.duplicated,
    `${row.seconds.toFixed(1)} s`,
  ];
  process.stdout.write(`| ${cells.join(' | ')} |\n`);
}
process.stdout.write(`\nAll done in ${((Date.now() - started) / 1000).toFixed(0)} s${failed ? ' — FAILED' : ''}\n`);
process.exit(failed ? 1 : 0);
