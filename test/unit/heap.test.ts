import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { IdleReclaim, mallocTrim, reclaimMemory } from '../../src/heap.ts';

/** glibc's version where this process runs on glibc (the machines the project is tested on). */
const glibc = (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header.glibcVersionRuntime;

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

  it('trims the C allocator too, where glibc runs', { skip: !glibc && 'not glibc' }, () => {
    const addon = mallocTrim();
    // npm ci builds native/malloc-trim; a machine that runs the tests has the compiler it needs.
    assert.ok(!(addon instanceof Error), `the addon did not load: ${String(addon)}`);
    assert.equal(addon.available, true);
    assert.equal(typeof reclaimMemory().mallocTrimmed, 'boolean');
  });
});

describe('malloc_trim (native/malloc-trim)', () => {
  it('gives back the pages freed between live blocks, which free() keeps', { skip: !glibc && 'not glibc' }, () => {
    // In a process of its own, so that nothing else allocates meanwhile: 90 MB in blocks under glibc's
    // mmap threshold, one block allocated after them kept alive so that the heap's top cannot shrink.
    const script = `
      import fs from 'node:fs';
      import { createRequire } from 'node:module';
      const { trim } = createRequire(process.cwd() + '/package.json')('tenantry-malloc-trim');
      const rss = () => Number(fs.readFileSync('/proc/self/statm', 'utf8').split(' ')[1]) * 4096;
      let blocks = Array.from({ length: 20000 }, () => Buffer.alloc(4608));
      const pin = Buffer.alloc(5000);
      blocks = null;
      for (let i = 0; i < 3; i++) { gc(); await new Promise((resolve) => setTimeout(resolve, 100)); }
      const freed = rss();
      const trimmed = trim();
      process.stdout.write(JSON.stringify({ freed, trimmed, after: rss(), pin: pin.length }));
    `;
    const out = execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], {
      encoding: 'utf8',
    });
    const { freed, trimmed, after } = JSON.parse(out) as { freed: number; trimmed: boolean; after: number };
    assert.equal(trimmed, true);
    assert.ok(after < freed - 60 * 1024 * 1024, `resident ${freed} → ${after} bytes`);
  });
});
