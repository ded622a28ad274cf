import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { afterAttempt } from '../../../src/mail/outcome.ts';

const AT = '2024-01-01T00:00:00.000Z';
const SCHEDULE = [1_000, 60_000];

describe('afterAttempt', () => {
  it('records a sent email as sent, with when, and no error', () => {
    assert.deepEqual(afterAttempt({ kind: 'sent' }, 0, SCHEDULE, AT), {
      status: 'sent',
      attemptCount: 1,
      nextAttemptAt: AT,
      lastError: null,
      sentAt: AT,
      updatedAt: AT,
    });
  });

  it('fails an email refused for good at once, keeping the reason', () => {
    const after = afterAttempt({ kind: 'rejected', error: '550 no such user' }, 0, SCHEDULE, AT);
    assert.equal(after.status, 'failed');
    assert.equal(after.lastError, '550 no such user');
    assert.equal(after.sentAt, undefined);
  });

  it('retries after the schedule’s wait for that attempt, then fails once the schedule is used up', () => {
    const started = Date.now();
    const first = afterAttempt({ kind: 'retryable', error: '421 try later' }, 0, SCHEDULE, AT);
    assert.equal(first.status, 'pending');
    assert.equal(first.attemptCount, 1);
    const wait = Date.parse(first.nextAttemptAt) - started;
    assert.ok(wait >= 1_000 && wait < 1_000 + 5_000, `${wait} ms`);
    assert.equal(afterAttempt({ kind: 'retryable', error: 'timeout' }, 1, SCHEDULE, AT).status, 'pending');
    const last = afterAttempt({ kind: 'retryable', error: 'timeout' }, 2, SCHEDULE, AT);
    assert.deepEqual(
      [last.status, last.attemptCount, last.nextAttemptAt, last.lastError],
      ['failed', 3, AT, 'timeout'],
    );
  });
});
