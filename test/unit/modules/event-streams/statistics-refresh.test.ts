import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { refreshStatisticsPast } from '../../../../src/modules/event-streams/deliveries.ts';
import { ANALYZE_AFTER_QUEUED } from '../../../../src/modules/event-streams/store/deliveries.ts';

/** Which of the given steps (queued before → after) refresh the statistics, for a walk in `lanes`. */
async function refreshedAt(steps: Array<[number, number]>, lanes?: number): Promise<Array<[number, number]>> {
  const refreshed: Array<[number, number]> = [];
  for (const [before, after] of steps) {
    let asked = false;
    await refreshStatisticsPast(
      {
        refreshStatistics: async () => {
          asked = true;
        },
      },
      { error: () => assert.fail('no failure') },
      before,
      after,
      lanes,
    );
    if (asked) refreshed.push([before, after]);
  }
  return refreshed;
}

describe('the statistics refresh after a redelivery', () => {
  const half = ANALYZE_AFTER_QUEUED / 2;
  const steps: Array<[number, number]> = [
    [0, half - 1],
    [half - 1, half],
    [half, ANALYZE_AFTER_QUEUED - 1],
    [ANALYZE_AFTER_QUEUED - 1, ANALYZE_AFTER_QUEUED],
    [ANALYZE_AFTER_QUEUED, 2 * ANALYZE_AFTER_QUEUED],
  ];

  it('runs once, at the step that passes the threshold', async () => {
    assert.deepEqual(await refreshedAt(steps), [[ANALYZE_AFTER_QUEUED - 1, ANALYZE_AFTER_QUEUED]]);
  });

  it('runs for each lane at its share of the threshold: a redelivery in two lanes queues half in each', async () => {
    assert.deepEqual(await refreshedAt(steps, 2), [[half - 1, half]]);
  });

  it('a failed refresh is logged, not thrown: the redelivery stands', async () => {
    const logged: unknown[] = [];
    await refreshStatisticsPast(
      {
        refreshStatistics: async () => {
          throw new Error('statistics unavailable');
        },
      },
      { error: (...args: unknown[]) => logged.push(args) },
      0,
      ANALYZE_AFTER_QUEUED,
    );
    assert.equal(logged.length, 1);
  });
});
