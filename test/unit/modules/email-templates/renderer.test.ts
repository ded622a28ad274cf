import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TemplateRenderer } from '../../../../src/modules/email-templates/renderer.ts';

describe('TemplateRenderer', () => {
  it("does not count the threads' start against a render's wait", async () => {
    // A limit far below a thread's start (it loads the template engine): a render asked for before any
    // thread is ready must wait for one, not be refused as if renders were flooding in.
    const renderer = new TemplateRenderer({ threads: 1, timeoutMs: 40 });
    try {
      const started = performance.now();
      const [body] = await renderer.render([{ part: 'body', source: 'Hello {{ name }}' }], { name: 'Ada' });
      assert.equal(body, 'Hello Ada');
      assert.ok(performance.now() - started > 40, 'the thread started within the limit: this test proves nothing');
    } finally {
      await renderer.close();
    }
  });
});
