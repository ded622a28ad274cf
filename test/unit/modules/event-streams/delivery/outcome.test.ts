import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { outcomeOf, type AttemptedDelivery } from '../../../../../src/modules/event-streams/delivery/outcome.ts';

const AT = '2025-03-01T12:00:00.000Z';
const after = (ms: number) => new Date(Date.parse(AT) + ms).toISOString();
const settings = { deliveryRetryScheduleMs: [1_000, 10_000, 60_000], deliveryRetryAfterMaxMs: 3_600_000 };
const claim = (attempts: number): AttemptedDelivery => ({
  stream_id: 'est_1',
  event_id: 'evt_1',
  attempt_count: attempts,
  attempt_seq: attempts + 2,
  claimed_until: '2025-03-01T12:01:00.000Z',
  updated_at: '2025-03-01T11:00:00.000Z',
});

describe('what an attempt means for its delivery', () => {
  it('a delivered attempt ends the delivery, under the lease it was made with, as the next row of its history', () => {
    const outcome = outcomeOf(claim(1), { kind: 'delivered', durationMs: 12.3456789 }, settings, AT);
    assert.deepEqual(outcome, {
      stream_id: 'est_1',
      event_id: 'evt_1',
      lease: '2025-03-01T12:01:00.000Z',
      status: 'delivered',
      attempt_count: 2,
      next_attempt_at: AT,
      at: AT,
      seq: 4,
      attempt_status: 'delivered',
      error_message: null,
      duration: 12.346,
      requeued_at: null,
    });
  });

  it("the first attempt after a redelivery carries that redelivery's time, for its retrying row; no other does", () => {
    const sent = { kind: 'delivered', durationMs: 1 } as const;
    // Queued again: attempts start over (count 0) after some were made (seq 5: four attempts and the marker).
    const first = outcomeOf({ ...claim(0), attempt_seq: 5 }, sent, settings, AT);
    assert.equal(first.requeued_at, '2025-03-01T11:00:00.000Z');
    assert.equal(first.seq, 6, 'the attempt follows the retrying row, which holds seq 5');
    assert.equal(outcomeOf({ ...claim(0), attempt_seq: 0 }, sent, settings, AT).requeued_at, null, 'a first attempt');
    assert.equal(outcomeOf({ ...claim(1), attempt_seq: 6 }, sent, settings, AT).requeued_at, null, 'a retry');
  });

  it('a retryable failure goes again after the wait the schedule gives the attempt it was', () => {
    const first = outcomeOf(claim(0), { kind: 'retryable', durationMs: 5, error: 'HTTP 503' }, settings, AT);
    assert.equal(first.status, 'pending');
    assert.equal(first.attempt_status, 'failed');
    assert.equal(first.error_message, 'HTTP 503');
    assert.equal(first.next_attempt_at, after(1_000));
    assert.equal(
      outcomeOf(claim(2), { kind: 'retryable', durationMs: 5, error: 'timeout' }, settings, AT).next_attempt_at,
      after(60_000),
    );
  });

  it('fails for good once the schedule is used up, whatever the endpoint asked', () => {
    const last = outcomeOf(
      claim(3),
      { kind: 'retryable', durationMs: 5, error: 'HTTP 429', retryAfterMs: 1_000 },
      settings,
      AT,
    );
    assert.equal(last.status, 'failed');
    assert.equal(last.attempt_count, 4);
    assert.equal(last.next_attempt_at, AT);
  });

  it('a refused attempt fails at once, with attempts left', () => {
    const refused = outcomeOf(claim(0), { kind: 'rejected', durationMs: 5, error: 'HTTP 404' }, settings, AT);
    assert.equal(refused.status, 'failed');
    assert.equal(refused.error_message, 'HTTP 404');
    assert.equal(refused.next_attempt_at, AT);
  });

  it('Retry-After pushes the retry later, never sooner, and no later than the cap', () => {
    const sent = (retryAfterMs: number) => ({
      kind: 'retryable' as const,
      durationMs: 5,
      error: 'HTTP 429',
      retryAfterMs,
    });
    assert.equal(outcomeOf(claim(0), sent(30_000), settings, AT).next_attempt_at, after(30_000));
    assert.equal(outcomeOf(claim(0), sent(10), settings, AT).next_attempt_at, after(1_000));
    assert.equal(outcomeOf(claim(0), sent(86_400_000), settings, AT).next_attempt_at, after(3_600_000));
  });
});
