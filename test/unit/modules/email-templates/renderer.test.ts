import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TemplateRenderer } from '../../../../src/modules/email-templates/renderer.ts';

describe('TemplateRenderer', () => {
  it("does not count the threads' start against a render's wait", async () => {
    // A render asked for before any thread is ready must wait for one, not be refused as if renders
    // were flooding in. This thread is kept busy for longer than the limit right after asking: the
    // render's thread starts meanwhile, and a limit counted from the asking would run out before the
    // render is even sent. The limit itself leaves a first render in a fresh thread on a loaded machine
    // room (at 40 ms, against the thread's own start, it once ran out in CI).
    const limitMs = 250;
    const renderer = new TemplateRenderer({ threads: 1, timeoutMs: limitMs, idleMs: 60_000 });
    try {
      const started = performance.now();
      const rendered = renderer.render([{ part: 'body', source: 'Hello {{ name }}' }], { name: 'Ada' });
      while (performance.now() - started < limitMs * 1.2) {
        // busy: nothing on this thread runs, the render's thread starts
      }
      const [body] = await rendered;
      assert.equal(body, 'Hello Ada');
    } finally {
      await renderer.close();
    }
  });

  it('ends a thread left idle for idleMs, and starts one again for the next render', async () => {
    const renderer = new TemplateRenderer({ threads: 1, timeoutMs: 5_000, idleMs: 200 });
    try {
      assert.equal(renderer.threadCount, 0, 'no thread before the first render');
      assert.deepEqual(await renderer.render([{ part: 'body', source: '{{ 1 | plus: 1 }}' }], {}), ['2']);
      assert.equal(renderer.threadCount, 1);
      // Renders in a row keep the thread: each one re-arms its idle time.
      for (let i = 0; i < 3; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        assert.deepEqual(await renderer.render([{ part: 'body', source: 'x{{ i }}' }], { i }), [`x${i}`]);
        assert.equal(renderer.threadCount, 1, 'a thread in use is kept');
      }
      const idleSince = performance.now();
      while (renderer.threadCount > 0 && performance.now() - idleSince < 10_000) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.equal(renderer.threadCount, 0, 'the idle thread was ended');
      assert.ok(performance.now() - idleSince >= 150, 'ended no sooner than its idle time');
      assert.deepEqual(await renderer.render([{ part: 'subject', source: 'again' }], {}), ['again']);
      assert.equal(renderer.threadCount, 1);
    } finally {
      await renderer.close();
    }
  });

  // The threads are every tenant's: with renders taken first come, first served, one client flooding them
  // with previews that run to the limit (read:email_templates is enough) made other tenants' new users
  // answer 429. Each test asks for its renders in one synchronous run, so the order is the policy's alone.
  it("takes each tenant's renders in turn: one tenant's waiting renders hold back no other's", async () => {
    const renderer = new TemplateRenderer({ threads: 1, timeoutMs: 60_000, idleMs: 60_000 });
    try {
      // The thread ready first: the first render below goes to it, the others wait.
      assert.deepEqual(await renderer.render([{ part: 'body', source: 'warm' }], {}, 'b'), ['warm']);
      const order: string[] = [];
      const ask = (key: string, i: number) =>
        renderer.render([{ part: 'body', source: `${key}${i}` }], {}, key).then(([output]) => order.push(output!));
      await Promise.all([...[1, 2, 3, 4, 5].map((i) => ask('a', i)), ask('b', 1), ask('a', 6), ask('c', 1)]);
      // a1 was running; then the tenants with none running, each in turn, before a's second.
      assert.deepEqual(order, ['a1', 'b1', 'c1', 'a2', 'a3', 'a4', 'a5', 'a6']);
    } finally {
      await renderer.close();
    }
  });

  it("lets one tenant fill only its share of the queue: another tenant's render is still taken", async () => {
    const renderer = new TemplateRenderer({ threads: 1, timeoutMs: 60_000, idleMs: 60_000 });
    try {
      assert.deepEqual(await renderer.render([{ part: 'body', source: 'warm' }], {}, 'a'), ['warm']);
      // One running and 256 waiting (the queue's bound per thread): a's share is full.
      const asked = Array.from({ length: 257 }, (_, i) =>
        renderer.render([{ part: 'body', source: `a${i}` }], {}, 'a'),
      );
      const over = renderer.render([{ part: 'body', source: 'a-over' }], {}, 'a');
      const other = renderer.render([{ part: 'body', source: 'b' }], {}, 'b');
      await assert.rejects(over, (error: { statusCode?: number }) => error.statusCode === 429);
      assert.deepEqual(await other, ['b']);
      assert.equal((await Promise.all(asked)).length, 257);
    } finally {
      await renderer.close();
    }
  });
});
