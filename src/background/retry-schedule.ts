/**
 * When the next attempt after a failed one goes, on a retry schedule (the waits after the first,
 * second, … attempt, in ms), and not sooner than `atLeastMs` (what the other side asked for);
 * undefined once the schedule is used up and the work has failed for good.
 */
export function nextAttemptAt(schedule: readonly number[], attempt: number, atLeastMs = 0): string | undefined {
  const wait = schedule[attempt - 1];
  return wait === undefined ? undefined : new Date(Date.now() + Math.max(wait, atLeastMs)).toISOString();
}
