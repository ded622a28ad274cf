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

export interface LoggerOptions {
  /** Where JSON log lines go (stdout by default). */
  stream?: NodeJS.WritableStream;
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
