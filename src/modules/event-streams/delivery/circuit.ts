/** What a stream's run of failed attempts leads to. */
export interface CircuitRules {
  /** Failures in a row that open the circuit. */
  openAfter: number;
  /**
   * The open circuit's first wait; doubled for each failure in the run past `openAfter`, up to 64 times.
   * Failures recorded while the circuit is open (sends that began before it opened) count toward the run
   * but do not extend the wait: the next failure to (re)open it is the probe's.
   */
  cooldownMs: number;
  /** Failures in a row that disable the stream; 0: never. */
  disableAfter: number;
  /** Told of each stream this recording disabled. */
  onDisabled(streamId: string): void;
}

export const disabledReason = (failures: number) => `Disabled after ${failures} consecutive failed delivery attempts.`;

/** How long the circuit stays open after the `run`-th failure in a row. */
export const cooldownMs = (rules: Pick<CircuitRules, 'cooldownMs' | 'openAfter'>, run: number) =>
  rules.cooldownMs * 2 ** Math.min(run - rules.openAfter, 6);

/**
 * A stream's attempts in a recorded batch: whether one succeeded, the failures after the last success,
 * and when the last one ended.
 */
export interface Tally {
  reset: boolean;
  failures: number;
  at: string;
}

/** Counts one recorded attempt (in the order they ended) into its stream's tally. */
export function tally(into: Tally | undefined, attempt: { attempt_status: 'delivered' | 'failed'; at: string }): Tally {
  const counted = into ?? { reset: false, failures: 0, at: attempt.at };
  if (attempt.attempt_status === 'delivered') Object.assign(counted, { reset: true, failures: 0 });
  else counted.failures++;
  counted.at = attempt.at;
  return counted;
}

/** What the circuit reads of a stream. */
export interface StreamRun {
  consecutive_failures: number;
  circuit_open_until: string | null;
  status: 'enabled' | 'disabled';
}

/** A stream's run once a batch is counted, and whether that disables it. */
export interface RunAfter {
  run: number;
  openUntil: string | null;
  disabled: boolean;
}

/**
 * A stream's run of failures after a batch of its attempts: a success starts it over and closes the
 * circuit; failures extend it, and once it reaches `openAfter` the circuit opens (again, after a probe
 * failed, for twice as long), unless it is open still; an enabled stream whose run reaches `disableAfter`
 * is disabled. Undefined when neither the run nor the circuit changes. (PostgreSQL: the same rules in
 * the statement of outcomes.ts.)
 */
export function runAfter(
  current: StreamRun,
  counted: Tally,
  rules: Omit<CircuitRules, 'onDisabled'>,
): RunAfter | undefined {
  const run = (counted.reset ? 0 : current.consecutive_failures) + counted.failures;
  const open = current.circuit_open_until !== null && current.circuit_open_until > counted.at;
  const openUntil =
    counted.failures > 0 && run >= rules.openAfter && (counted.reset || !open)
      ? new Date(Date.parse(counted.at) + cooldownMs(rules, run)).toISOString()
      : counted.reset
        ? null
        : current.circuit_open_until;
  if (run === current.consecutive_failures && openUntil === current.circuit_open_until) return undefined;
  const disabled = current.status === 'enabled' && rules.disableAfter > 0 && run >= rules.disableAfter;
  return { run, openUntil, disabled };
}
