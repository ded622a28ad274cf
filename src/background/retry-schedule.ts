/**
 * When the next attempt after a failed one goes, on a retry schedule (the waits after the first,
 * second, … attempt, in ms) counted from `fromMs` (now), and not sooner than `atLeastMs` (what the
 * other side asked for); undefined once the schedule is used up and the work has failed for good.
 */
export function nextAttemptAt(
  schedule: readonly number[],
  attempt: number,
  atLeastMs = 0,
  fromMs = Date.now(),
): string | undefined {
  const wait = schedule[attempt - 1];
  return wait === undefined ? undefined : new Date(fromMs + Math.max(wait, atLeastMs)).toISOString();
}
