import fs from 'node:fs';
import { pino, type Logger as PinoLogger } from 'pino';
import type { Config } from './config.ts';
import { CENSOR, redactHeaders, redactUrl } from './http/log-redaction.ts';

/**
 * The server's one logger. The HTTP layer, background workers, the rate limiter, certificate renewal
 * and DNS re-checks all write through it: the same JSON lines, the same redaction.
 */
export type Logger = PinoLogger;

/** Log redaction: credentials and secrets never reach the logs, wherever they appear. */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["cname-api-key"]',
  'headers.authorization',
  '*.password',
  '*.client_secret',
  '*.secret',
  '*.api_key',
  '*.token',
  '*.header_value',
  '*.access_token',
  '*.refresh_token',
];

/**
 * The server's stdout, written asynchronously: log lines gather in memory and go out in writes of at
 * least 4 KB (or every 250 ms, for a quiet server), so a busy request path makes one write per dozen
 * lines rather than one per line, and never waits on the disk or a slow reader. Lines are joined into
 * chunks here (LineChunks) before pino's own destination (sonic-boom) takes them. The chunks are
 * flushed synchronously when the process exits, by process.exit or an uncaught error, and by
 * `flushLogger` when the services close. What a crash that skips exit handlers (SIGKILL, the OOM
 * killer, a native fault) loses is what was not written yet: at most the last 250 ms of lines, a few
 * KB. `dest`: another descriptor or a file, for the tests. What waits is bounded in bytes (see
 * MAX_BUFFERED_LOG_BYTES).
 */
export function bufferedStdout(
  dest: number | string = 1,
  options: { maxBytes?: number; onDrop?: (bytes: number, lines: number) => void } = {},
): BufferedDestination {
  const destination = pino.destination({
    dest,
    sync: false,
    minLength: CHUNK_CHARACTERS,
    // One write takes all that waited, up to 1 MiB: at 16 KB a write (sonic-boom's default), a busy
    // event loop that completes one write per turn falls behind a request path logging 10 MB/s.
    maxWrite: 1024 * 1024,
    maxLength: options.maxBytes ?? MAX_BUFFERED_LOG_BYTES,
  });
  const onDrop = options.onDrop ?? dropWarning();
  // What is dropped is a chunk of lines, each ending in a newline.
  destination.on('drop', (data: string) => onDrop(Buffer.byteLength(data), linesIn(data)));
  return new LineChunks(destination);
}

function linesIn(data: string): number {
  let lines = 0;
  for (let at = data.indexOf('\n'); at !== -1; at = data.indexOf('\n', at + 1)) lines++;
  return lines;
}

/** pino's own destination, and what of its state it does not declare. */
type SonicBoom = ReturnType<typeof pino.destination>;
type SonicBoomState = { readonly destroyed: boolean; readonly fd: number };

/** Lines are handed to sonic-boom joined, once this many characters wait (its minimum write, too). */
const CHUNK_CHARACTERS = 4096;
/** How long a line may wait for more before it is written anyway. */
const FLUSH_EVERY_MS = 250;
/** At exit, how often a write that would block (a full pipe) is tried again, 10 ms apart, as sonic-boom does. */
const EXIT_WRITE_TRIES = 100;

/** What bufferedStdout returns: pino's destination stream, and the sonic-boom that writes it (for the tests). */
export interface BufferedDestination extends pino.DestinationStream {
  readonly destination: SonicBoom;
  flush(callback?: (error?: Error) => void): void;
  flushSync(): void;
}

/**
 * Lines joined into chunks before sonic-boom takes them. sonic-boom measures, at every write, the
 * UTF-8 length of the buffer it appends to (`Buffer.byteLength` of a string grown by `+=`, which V8
 * first copies flat); while one of its writes is in flight that buffer holds every line since, so a
 * line cost a copy of all the lines before it: under load about 5 µs a request, growing with the
 * rate. Here a line costs a push; sonic-boom sees one write per chunk of at least 4 KB. Once sonic-boom
 * is ended, lines are dropped, as nothing can write them.
 */
class LineChunks implements BufferedDestination {
  private lines: string[] = [];
  private characters = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(readonly destination: SonicBoom) {
    this.timer = setInterval(() => this.flush(), FLUSH_EVERY_MS);
    this.timer.unref();
    destination.on('close', () => this.stop());
    unflushed.add(this);
    flushAtExit();
  }

  write(line: string): void {
    this.lines.push(line);
    this.characters += line.length;
    if (this.characters >= CHUNK_CHARACTERS) this.handOver();
  }

  /** Hands every waiting line to sonic-boom, then has it write (callback once written). */
  flush(callback?: (error?: Error) => void): void {
    if (this.ended()) {
      callback?.();
      return;
    }
    this.handOver();
    this.destination.flush(callback);
  }

  /**
   * Writes what sonic-boom holds, then the lines waiting here, before it returns (at exit, and after a
   * fatal line). The lines go to the descriptor directly: handed to sonic-boom, a chunk of 4 KB or more
   * starts an asynchronous write that its flushSync leaves to the thread pool, which exit does not wait for.
   */
  flushSync(): void {
    if (this.ended()) return;
    this.destination.flushSync();
    if (this.lines.length === 0) return;
    const chunk = Buffer.from(this.take());
    const { fd } = this.destination as unknown as SonicBoomState;
    for (let written = 0, tries = 0; written < chunk.length;) {
      try {
        written += fs.writeSync(fd, chunk, written);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if ((code !== 'EAGAIN' && code !== 'EBUSY') || ++tries > EXIT_WRITE_TRIES) throw error;
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
      }
    }
  }

  private handOver(): void {
    if (this.lines.length === 0 || this.ended()) return;
    this.destination.write(this.take());
  }

  private take(): string {
    const chunk = this.lines.length === 1 ? this.lines[0]! : this.lines.join('');
    this.lines = [];
    this.characters = 0;
    return chunk;
  }

  /**
   * Whether sonic-boom was ended or destroyed: it says so at once, but emits 'close' only once its
   * descriptor is closed (or never, should closing fail), and throws at every write or flush meanwhile.
   */
  private ended(): boolean {
    if (!(this.destination as unknown as SonicBoomState).destroyed) return false;
    this.stop();
    return true;
  }

  private stop(): void {
    clearInterval(this.timer);
    unflushed.delete(this);
    this.lines = [];
    this.characters = 0;
  }
}

/** Every LineChunks not ended yet: what the exit handler writes out. */
const unflushed = new Set<LineChunks>();
let exitHandled = false;

/** One exit handler for them all: each writes what its sonic-boom holds, then its own lines. */
function flushAtExit(): void {
  if (exitHandled) return;
  exitHandled = true;
  process.on('exit', () => {
    for (const chunks of unflushed) {
      try {
        chunks.flushSync();
      } catch {
        // A destination still opening or already broken: nothing more can be written at exit.
      }
    }
  });
}

/**
 * Lines held while stdout does not keep up (a full disk, a log shipper that stopped reading): past
 * this, new lines are dropped rather than held, so a stalled reader cannot grow the heap without end.
 */
const MAX_BUFFERED_LOG_BYTES = 16 * 1024 * 1024;

/**
 * Says on stderr, at most every 10 s, how much was dropped: not through the logger, whose output is what
 * is stuck.
 */
function dropWarning(): (bytes: number, lines: number) => void {
  let dropped = 0;
  let lines = 0;
  let timer: NodeJS.Timeout | undefined;
  return (bytes, droppedLines) => {
    dropped += bytes;
    lines += droppedLines;
    timer ??= setTimeout(() => {
      process.stderr.write(
        `tenantry: ${lines} log lines (${dropped} bytes) dropped: stdout is not keeping up and ${MAX_BUFFERED_LOG_BYTES} bytes are waiting\n`,
      );
      dropped = 0;
      lines = 0;
      timer = undefined;
    }, 10_000);
    timer.unref();
  };
}

/** Resolves once the lines the logger holds are handed to its destination (errors of flushing are not the caller's). */
export function flushLogger(logger: Logger): Promise<void> {
  return new Promise((resolve) => logger.flush(() => resolve()));
}

/** Where JSON log lines go: a stream (the tests' PassThrough) or a pino destination. */
export type LogDestination = NodeJS.WritableStream | pino.DestinationStream;

export interface LoggerOptions {
  /** Where JSON log lines go (stdout by default). */
  stream?: LogDestination;
}

export function createLogger(config: Pick<Config, 'logLevel'>, options: LoggerOptions = {}): Logger {
  const settings = {
    level: config.logLevel,
    redact: { paths: REDACTED_PATHS, censor: CENSOR },
    serializers: {
      // Headers help operators trace a request; redaction above keeps credentials out of them.
      req: (request: { id: string; method: string; url: string; headers: Record<string, unknown> }) => ({
        id: request.id,
        method: request.method,
        url: redactUrl(request.url),
        headers: redactHeaders(request.headers),
      }),
    },
  };
  return options.stream ? pino(settings, options.stream as pino.DestinationStream) : pino(settings);
}
