import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TemplateRenderer } from '../../../../src/modules/email-templates/renderer.ts';

describe('TemplateRenderer', () => {
  it("does not count the threads' start against a render's wait", async () => {
    // A limit far below a thread's start (it loads the template engine): a render asked for before any
    // thread is ready must wait for one, not be refused as if renders were flooding in.
    const renderer = new TemplateRenderer({ threads: 1, timeoutMs: 40, idleMs: 60_000 });
    try {
      const started = performance.now();
      const [body] = await renderer.render([{ part: 'body', source: 'Hello {{ name }}' }], { name: 'Ada' });
      assert.equal(body, 'Hello Ada');
      assert.ok(performance.now() - started > 40, 'the thread started within the limit: this test proves nothing');
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
});
