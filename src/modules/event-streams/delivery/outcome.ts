import { nextAttemptAt } from '../../../background/retry-schedule.ts';
import type { Config } from '../../../config.ts';
import type { SendOutcome } from './send.ts';
import { requeued } from '../store/deliveries.ts';

/** One finished attempt: the delivery's next state and the attempt's row. */
export interface Outcome {
  stream_id: string;
  event_id: string;
  /** The lease the attempt was made under. */
  lease: string;
  status: 'pending' | 'delivered' | 'failed';
  attempt_count: number;
  next_attempt_at: string;
  /** When the attempt ended: the attempt's timestamp and the delivery's updated_at. */
  at: string;
  /** The attempt row's place in the delivery's history: the claimed attempt_seq plus one. */
  seq: number;
  attempt_status: 'delivered' | 'failed';
  error_message: string | null;
  /** Milliseconds. */
  duration: number;
  /**
   * When the delivery was queued again, for the first attempt after a redelivery: that redelivery's
   * `retrying` row (seq `seq` − 1) is written with this attempt (see DeliveryStore.queueAgain).
   */
  requeued_at: string | null;
}

/** What of a claimed delivery its outcome needs. */
export interface AttemptedDelivery {
  stream_id: string;
  event_id: string;
  attempt_count: number;
  attempt_seq: number;
  /** The lease the claim holds. */
  claimed_until: string;
  updated_at: string;
}

export type RetrySettings = Pick<Config, 'deliveryRetryScheduleMs' | 'deliveryRetryAfterMaxMs'>;

/**
 * What an attempt that ended at `at` means for its delivery: delivered; or, when the endpoint may
 * accept it later, another attempt at the next wait of the schedule; or failed for good (refused, or
 * the schedule used up). An endpoint's Retry-After may push the retry later, up to the cap, but never
 * adds attempts.
 */
export function outcomeOf(claim: AttemptedDelivery, sent: SendOutcome, settings: RetrySettings, at: string): Outcome {
  const attempt = claim.attempt_count + 1;
  const asked = sent.kind === 'retryable' ? Math.min(sent.retryAfterMs ?? 0, settings.deliveryRetryAfterMaxMs) : 0;
  const retryAt =
    sent.kind === 'retryable'
      ? nextAttemptAt(settings.deliveryRetryScheduleMs, attempt, asked, Date.parse(at))
      : undefined;
  const status: Outcome['status'] =
    sent.kind === 'delivered' ? 'delivered' : retryAt !== undefined ? 'pending' : 'failed';
  return {
    stream_id: claim.stream_id,
    event_id: claim.event_id,
    lease: claim.claimed_until,
    status,
    attempt_count: attempt,
    next_attempt_at: retryAt ?? at,
    at,
    seq: claim.attempt_seq + 1,
    attempt_status: sent.kind === 'delivered' ? 'delivered' : 'failed',
    error_message: sent.kind === 'delivered' ? null : sent.error,
    duration: Math.round(sent.durationMs * 1000) / 1000,
    requeued_at: requeued(claim) ? claim.updated_at : null,
  };
}
