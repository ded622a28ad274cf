/**
 * The long fuzzing run: `npm run fuzz -- --requests 1000000 [--database postgres] [--seed N] [--keep-going]`.
 * Prints the request count, the statuses' histogram and the duration; with --keep-going, every kind of
 * violation found (how often, and one example) instead of stopping at the first.
 */
import { parseArgs } from 'node:util';
import { fuzz, fuzzSeed, startFuzzTarget } from './helpers/fuzz/harness.ts';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: process.env.FUZZ_REQUESTS ?? '100000' },
    database: { type: 'string', default: 'sqlite' },
    seed: { type: 'string' },
    'keep-going': { type: 'boolean', default: false },
    verbose: { type: 'boolean', default: false },
  },
});
const kind = values.database === 'postgres' ? 'postgres' : 'sqlite';
const requests = Number(values.requests);
const seed = values.seed !== undefined ? Number(values.seed) : fuzzSeed();
process.env.LOG_LEVEL ??= 'silent';

const target = await startFuzzTarget(kind, { keepGoing: values['keep-going'] });
const started = Date.now();
const sentSoFar = () => [...target.statuses.values()].reduce((a, b) => a + b, 0);
const progress = setInterval(
  () => console.error(`… ${sentSoFar()} requests, ${((Date.now() - started) / 1000).toFixed(0)} s`),
  60_000,
);
let failed: unknown;
try {
  await fuzz(target, requests, seed);
} catch (error) {
  failed = error;
}
clearInterval(progress);
const seconds = (Date.now() - started) / 1000;
const sent = sentSoFar();
console.log(
  `database ${kind}, seed ${seed}: ${sent} requests in ${seconds.toFixed(1)} s (${(sent / seconds).toFixed(0)}/s)`,
);
const histogram = (statuses: Map<number, number>) =>
  [...statuses]
    .sort(([a], [b]) => a - b)
    .map(([s, n]) => `${s}:${n}`)
    .join(' ');
console.log(`statuses: ${histogram(target.statuses)}`);
if (values.verbose)
  for (const [name, statuses] of [...target.byOperation].sort()) console.log(`  ${name}: ${histogram(statuses)}`);
for (const [key, { count, example }] of target.failures) console.log(`\n✖ ${count}× ${key}\n${example}`);
await target.close();
if (failed !== undefined) {
  console.error(failed);
  process.exit(1);
}
console.log(target.failures.size === 0 ? 'no violations' : `${target.failures.size} kinds of violations`);
process.exit(target.failures.size === 0 ? 0 : 1);
