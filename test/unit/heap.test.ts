import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { IdleReclaim, reclaimMemory } from '../../src/heap.ts';

/** An IdleReclaim driven by hand: `work(ms)` spends that much CPU time before the next sample. */
function driven() {
  let cpu = 0;
  let reclaims = 0;
  const idle = new IdleReclaim({
    cpuMicros: () => cpu,
    intervalMs: 10_000,
    reclaim: () => {
      reclaims++;
      cpu += 50_000; // the collection's own 50 ms
    },
  });
  return {
    idle,
    reclaims: () => reclaims,
    sample: (busyMs = 0) => {
      cpu += busyMs * 1000;
      return idle.sample();
    },
  };
}

describe('IdleReclaim', () => {
  it('never reclaims in a process that has not worked since it started', () => {
    const d = driven();
    for (let i = 0; i < 10; i++) assert.equal(d.sample(5), false);
    assert.equal(d.reclaims(), 0);
  });

  it('reclaims once, after three quiet samples that follow work, and again only after more work', () => {
    const d = driven();
    d.sample(3000); // 30% of a core: work
    assert.deepEqual([d.sample(10), d.sample(10)], [false, false]);
    assert.equal(d.sample(10), true, 'the third quiet sample (under 2% of a core) reclaims');
    for (let i = 0; i < 5; i++) assert.equal(d.sample(0), false, 'its own CPU time is not work');
    assert.equal(d.reclaims(), 1);
    d.sample(500); // 5%: work again
    d.sample(0);
    d.sample(0);
    assert.equal(d.sample(0), true);
    assert.equal(d.reclaims(), 2);
  });

  it('starts counting quiet samples again when work resumes before the third', () => {
    const d = driven();
    d.sample(1000);
    d.sample(0);
    d.sample(0);
    d.sample(1000);
    assert.deepEqual([d.sample(0), d.sample(0), d.sample(0)], [false, false, true]);
  });
});

describe('reclaimMemory', () => {
  it("gives V8's grown heap back and runs the extra release it is given", () => {
    const garbage = (count: number) => {
      const made: Array<{ n: number; s: string }> = [];
      for (let i = 0; i < count; i++) made.push({ n: i, s: `user${i}@example.com` });
      return made.length;
    };
    assert.equal(garbage(1_000_000), 1_000_000);
    const grown = process.memoryUsage().heapTotal;
    let released = false;
    reclaimMemory(() => (released = true));
    const after = process.memoryUsage().heapTotal;
    assert.ok(released);
    assert.ok(after < grown - 30 * 1024 * 1024, `heap total ${grown} → ${after}`);
  });
});
