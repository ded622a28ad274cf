export interface PollingLoopOptions {
  /** One look for work; resolves to the wait before the next one (ms), 0 for another round at once. */
  round: () => Promise<number>;
  /** The wait after a round that threw (ms). */
  afterFailureMs: () => number;
  /** Errors of rounds (unless stopped) and of tracked tasks. */
  onError: (error: unknown) => void;
}

/**
 * Runs a background worker's rounds one at a time: the first after a delay, each next one after the
 * wait its round asked for, or sooner on `wake()`. Wakes that come together (in the same turn of the
 * event loop, or during a round) make one round, so work is picked up in batches. The tasks a round
 * starts (sends, checks) are tracked, so that `stop()` can wait for them. Its timers are unref'd: a
 * process with nothing else to do exits.
 */
export class PollingLoop {
  private isStopped = true;
  private timer: NodeJS.Timeout | undefined;
  private soon: NodeJS.Immediate | undefined;
  private running: Promise<void> | undefined;
  /** Set by a wake during a round: one more round follows it. */
  private again = false;
  private readonly tasks = new Set<Promise<void>>();

  constructor(private readonly options: PollingLoopOptions) {}

  get stopped(): boolean {
    return this.isStopped;
  }

  /** Tracked tasks not settled yet. */
  get inFlight(): number {
    return this.tasks.size;
  }

  start(firstRoundInMs: number): void {
    if (!this.isStopped) return;
    this.isStopped = false;
    if (firstRoundInMs <= 0) this.wake();
    else this.schedule(firstRoundInMs);
  }

  /** Stops scheduling rounds, then waits for the round under way and for every tracked task. */
  async stop(): Promise<void> {
    this.isStopped = true;
    clearTimeout(this.timer);
    clearImmediate(this.soon);
    this.soon = undefined;
    await this.running;
    await Promise.allSettled([...this.tasks]);
  }

  /** Runs a round as soon as possible (in the next turn of the event loop, or right after the one under way). */
  wake(): void {
    if (this.isStopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.soon ??= setImmediate(() => {
      this.soon = undefined;
      if (this.isStopped || this.running) return;
      clearTimeout(this.timer);
      this.running = this.rounds().finally(() => {
        this.running = undefined;
        if (this.again) this.wake();
      });
    });
  }

  /**
   * Keeps a task a round started in flight until it settles: its error goes to onError, `stop()` waits
   * for it, and `settled` runs once it no longer counts in `inFlight`.
   */
  track(task: Promise<unknown>, settled?: () => void): void {
    const tracked: Promise<void> = task
      .then(
        () => undefined,
        (error: unknown) => this.options.onError(error),
      )
      .finally(() => {
        this.tasks.delete(tracked);
        settled?.();
      });
    this.tasks.add(tracked);
  }

  private async rounds(): Promise<void> {
    let waitMs: number;
    do {
      this.again = false;
      try {
        waitMs = await this.options.round();
      } catch (error) {
        if (!this.isStopped) this.options.onError(error);
        waitMs = this.options.afterFailureMs();
      }
    } while ((this.again || waitMs <= 0) && !this.isStopped);
    this.schedule(waitMs);
  }

  private schedule(delayMs: number): void {
    if (this.isStopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.wake(), delayMs);
    this.timer.unref();
  }
}
