import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { eachDatabase } from './helpers/databases.ts';
import { fuzz, fuzzSeed, startFuzzTarget, type FuzzTarget } from './helpers/fuzz/harness.ts';

/** Requests per database; CI's default keeps each database's run within about two minutes on 2 cores. */
const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 10_000);

// Both databases side by side: a PostgreSQL run's time is half spent in the database server's process.
describe('fuzzing every operation of the OpenAPI document', { concurrency: true }, () =>
  eachDatabase((kind) => {
    describe(`fuzzing every operation of the OpenAPI document (${kind})`, { timeout: 15 * 60_000 }, () => {
      let target: FuzzTarget;
      before(async () => {
        target = await startFuzzTarget(kind);
      });
      after(() => target.close());

      const title =
        `answers ${REQUESTS} generated requests without a 5xx, a hang, a stray error shape, a change on refusal ` +
        `or a reachable foreign id (seed ${fuzzSeed()})`;
      it(title, async () => {
        const started = Date.now();
        await fuzz(target, REQUESTS);
        const histogram = [...target.statuses]
          .sort(([a], [b]) => a - b)
          .map(([s, n]) => `${s}:${n}`)
          .join(' ');
        console.log(
          `fuzz (${kind}): ${REQUESTS} requests in ${((Date.now() - started) / 1000).toFixed(1)} s; statuses ${histogram}`,
        );
        assert.deepEqual(target.outbound, []);
        assert.ok((await target.rowChanges()) > 0, 'the change counters saw none of the accepted writes');
        assert.ok(
          (target.statuses.get(200) ?? 0) + (target.statuses.get(201) ?? 0) > REQUESTS / 50,
          'too few requests succeeded to reach deep',
        );
      });
    });
  }),
);
