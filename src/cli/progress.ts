/** How far a long command is: done so far, its rate, and (when the share done is known) the time left. */
export interface Progress {
  done: number;
  seconds: number;
  /** Share of the work done, 0–1, when it can be told (bytes of a file read so far). */
  fraction?: number;
}

/** One progress line: `120,000 users · 52,310 users/s · 45% · about 3 s left`. */
export function progressLine(noun: string, { done, seconds, fraction }: Progress): string {
  const rate = seconds > 0 ? done / seconds : 0;
  const parts = [`${done.toLocaleString('en-US')} ${noun}`, `${Math.round(rate).toLocaleString('en-US')} ${noun}/s`];
  if (fraction !== undefined && fraction > 0 && fraction <= 1) {
    parts.push(`${Math.floor(fraction * 100)}%`);
    const left = (seconds / fraction) * (1 - fraction);
    parts.push(`about ${left < 60 ? `${Math.ceil(left)} s` : `${Math.ceil(left / 60)} min`} left`);
  }
  return parts.join(' · ');
}

/**
 * Progress of a long command on stderr (stdout keeps the result alone). On a terminal one line is
 * rewritten in place, at most ten times a second, and cleared at the end; otherwise (a log, CI) a plain
 * line is written every `plainEveryMs`, so the output stays readable and small.
 */
export function progressReporter(
  noun: string,
  options: { stream?: NodeJS.WriteStream; plainEveryMs?: number; now?: () => number } = {},
) {
  const stream = options.stream ?? process.stderr;
  const now = options.now ?? (() => performance.now());
  const started = now();
  const every = stream.isTTY ? 100 : (options.plainEveryMs ?? 5_000);
  let last = started;
  let shown = false;
  return {
    update(done: number, fraction?: number): void {
      const at = now();
      if (at - last < every) return;
      last = at;
      const line = progressLine(noun, { done, seconds: (at - started) / 1000, fraction });
      if (stream.isTTY) {
        stream.write(`\r\x1b[2K${line}`);
        shown = true;
      } else stream.write(`${line}\n`);
    },
    /** Clears the rewritten line, before the summary is printed. */
    end(): void {
      if (shown) stream.write('\r\x1b[2K');
    },
  };
}
