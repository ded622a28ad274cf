/**
 * When the next attempt after a failed one goes, on a retry schedule (the waits after the first,
 * second, … attempt, in ms); undefined once the schedule is used up and the work has failed for good.
 */
export function nextAttemptAt(schedule: readonly number[], attempt: number): string | undefined {
  const wait = schedule[attempt - 1];
  return wait === undefined ? undefined : new Date(Date.now() + wait).toISOString();
}
