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
 * lines rather than one per line, and never waits on the disk or a slow reader. pino's own destination
 * (sonic-boom): flushed synchronously when the process exits, by process.exit or an uncaught error,
 * and by `flushLogger` when the services close. What a crash that skips exit handlers (SIGKILL, the
 * OOM killer, a native fault) loses is what was not written yet: at most the last 250 ms of lines,
 * a few KB. `dest`: another descriptor or a file, for the tests. What waits is bounded in bytes (see
 * MAX_BUFFERED_LOG_BYTES).
 */
export function bufferedStdout(
  dest: number | string = 1,
  options: { maxBytes?: number; onDrop?: (bytes: number) => void } = {},
): pino.DestinationStream {
  const destination = pino.destination({
    dest,
    sync: false,
    minLength: 4096,
    periodicFlush: 250,
    // One write takes all that waited, up to 1 MiB: at 16 KB a write (sonic-boom's default), a busy
    // event loop that completes one write per turn falls behind a request path logging 10 MB/s.
    maxWrite: 1024 * 1024,
    maxLength: options.maxBytes ?? MAX_BUFFERED_LOG_BYTES,
  });
  const onDrop = options.onDrop ?? dropWarning();
  destination.on('drop', (data: string) => onDrop(Buffer.byteLength(data)));
  return destination;
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
function dropWarning(): (bytes: number) => void {
  let dropped = 0;
  let lines = 0;
  let timer: NodeJS.Timeout | undefined;
  return (bytes) => {
    dropped += bytes;
    lines++;
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
