import { nextAttemptAt } from '../background/retry-schedule.ts';
import type { AttemptRecord } from './store.ts';
import type { MailOutcome } from './transport.ts';

/**
 * What one attempt at sending leaves: sent → `sent` (with no copy of the body kept); refused for good
 * (5xx, or a body that cannot be read) → `failed`; anything else is retried after the schedule's next
 * wait, and `failed` once the schedule is used up.
 */
export function afterAttempt(
  outcome: MailOutcome,
  attemptsBefore: number,
  retryScheduleMs: readonly number[],
  at: string,
): AttemptRecord {
  const attemptCount = attemptsBefore + 1;
  const retryAt = outcome.kind === 'retryable' ? nextAttemptAt(retryScheduleMs, attemptCount) : undefined;
  const status = outcome.kind === 'sent' ? 'sent' : retryAt !== undefined ? 'pending' : 'failed';
  return {
    status,
    attemptCount,
    nextAttemptAt: retryAt ?? at,
    lastError: outcome.kind === 'sent' ? null : outcome.error,
    ...(outcome.kind === 'sent' ? { sentAt: at } : {}),
    updatedAt: at,
  };
}
