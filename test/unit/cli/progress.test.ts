import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { progressLine, progressReporter } from '../../../src/cli/progress.ts';

/** A stream that keeps what is written, a terminal or not. */
function stream(isTTY: boolean) {
  const written: string[] = [];
  return { written, stream: { isTTY, write: (text: string) => written.push(text) } as unknown as NodeJS.WriteStream };
}

describe('progress of a long command', () => {
  it('says how many, how fast, and when the share done is known, how much is left', () => {
    assert.equal(progressLine('users', { done: 120_000, seconds: 2 }), '120,000 users · 60,000 users/s');
    assert.equal(
      progressLine('users', { done: 120_000, seconds: 2, fraction: 0.4 }),
      '120,000 users · 60,000 users/s · 40% · about 3 s left',
    );
    assert.equal(
      progressLine('users', { done: 1000, seconds: 100, fraction: 0.5 }),
      '1,000 users · 10 users/s · 50% · about 2 min left',
    );
    assert.equal(progressLine('users', { done: 0, seconds: 0, fraction: 0 }), '0 users · 0 users/s');
  });

  it('rewrites one line on a terminal at most ten times a second, and clears it at the end', () => {
    let now = 0;
    const out = stream(true);
    const progress = progressReporter('users', { stream: out.stream, now: () => now });
    now = 50;
    progress.update(5000, 0.1);
    assert.deepEqual(out.written, [], 'not within 100 ms of the start');
    now = 1000;
    progress.update(10_000, 0.5);
    now = 1050;
    progress.update(15_000, 0.6);
    progress.end();
    assert.deepEqual(out.written, ['\r\x1b[2K10,000 users · 10,000 users/s · 50% · about 1 s left', '\r\x1b[2K']);
  });

  it('writes plain lines, seldom, when stderr is not a terminal, and nothing to clear', () => {
    let now = 0;
    const out = stream(false);
    const progress = progressReporter('users', { stream: out.stream, now: () => now, plainEveryMs: 5000 });
    for (now = 1000; now <= 12_000; now += 1000) progress.update(now * 10);
    progress.end();
    assert.deepEqual(out.written, ['50,000 users · 10,000 users/s\n', '100,000 users · 10,000 users/s\n']);
  });
});
