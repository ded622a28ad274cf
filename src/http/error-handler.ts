import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { databaseUnavailable } from '../db/unavailable.ts';
import {
  ApiError,
  badRequest,
  clientError,
  frameworkError,
  notFound,
  payloadTooLarge,
  serviceUnavailable,
  unsupportedMediaType,
  uriTooLong,
} from './errors.ts';
import { validationError } from './validation.ts';

/**
 * Turns anything a request can throw into the original's error body; a database that cannot serve
 * for now (full disk, read-only storage, lost connection) is a 503 with Retry-After; only real
 * faults become 500s.
 */
export function registerErrorHandling(app: FastifyInstance, bodyLimitBytes: number): void {
  app.setNotFoundHandler((_request, reply) => {
    const error = notFound.route();
    return reply.code(error.statusCode).send(error.toBody());
  });

  app.setErrorHandler((raw: FastifyError | ApiError | Error, request, reply) => {
    if (bodyAborted(raw, request.raw)) {
      // Not the database's doing: Node names it ECONNRESET, as a lost database connection is. The
      // answer reaches nobody, and Fastify writes no access line for it: this line is the request's.
      const timedOut = (request.raw.socket as Partial<TimedOut>)[TIMED_OUT] === true;
      request.log.info(
        { tenant: request.tenant?.id, method: request.method, route: request.routeOptions.url },
        timedOut
          ? 'request timed out: its body did not arrive within REQUEST_TIMEOUT_MS'
          : 'request aborted: its connection closed before its body arrived',
      );
      const error = timedOut ? clientError.timeout() : badRequest.aborted();
      return reply.code(error.statusCode).send(error.toBody());
    }
    const unavailable = databaseUnavailable(raw);
    if (unavailable) {
      // Named by the driver's code, so the operator sees which condition to clear.
      request.log.error(
        { err: raw, code: unavailable.code },
        `database unavailable (${unavailable.code}): ${raw.message}`,
      );
    }
    const error = unavailable
      ? serviceUnavailable(unavailable)
      : toApiError(raw, request.headers['content-type'], bodyLimitBytes);
    if (!error) {
      request.log.error({ err: raw }, 'request failed');
      return reply
        .code(500)
        .send({ statusCode: 500, error: 'Internal Server Error', message: 'Internal Server Error' });
    }
    if (error.logAtWarn)
      request.log.warn(
        { tenant: request.tenant?.id, statusCode: error.statusCode, errorCode: error.errorCode },
        error.message,
      );
    if (error.headers) reply.headers(error.headers);
    return reply.code(error.statusCode).send(error.toBody());
  });
}

/** Marks a connection Node refused for a request that did not arrive in time, once its handler was called. */
const TIMED_OUT = Symbol('timedOut');
interface TimedOut {
  [TIMED_OUT]: boolean;
}

/**
 * Node's error on a request's body stream when its connection closed before the body ended: the client
 * went away, or Node refused the request for arriving too slowly (request-timeouts.ts).
 */
function bodyAborted(raw: Error, incoming: IncomingMessage): boolean {
  return (raw as { code?: unknown }).code === 'ECONNRESET' && raw.message === 'aborted' && incoming.readableAborted;
}

/**
 * Answers what Node's HTTP parser refused before any route (a malformed start line or header, headers
 * over the limit, a request that did not arrive in time) in the API's error shape, then closes the
 * connection: after such an error the parser cannot find the next request. Logged at debug with the
 * parser's code and reason only: the error also carries the bytes it could not read, which may hold a
 * token.
 */
export function clientErrorHandler(this: FastifyInstance, error: Error & ClientErrorFields, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const refusal =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? clientError.headersTooLarge()
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? clientError.timeout()
        : clientError.malformed(parserReason(error));
  this.log.debug({ code: error.code, reason: error.reason }, 'request refused by the HTTP parser');
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') (socket as Duplex & Partial<TimedOut>)[TIMED_OUT] = true;
  // Not in the middle of a response already begun (a request pipelined behind one being answered):
  // the refusal would land inside that response's body. Node's own handler keeps the same rule.
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) {
    const body = JSON.stringify(refusal.toBody());
    socket.write(
      `HTTP/1.1 ${refusal.statusCode} ${STATUS_CODES[refusal.statusCode]}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Connection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

interface ClientErrorFields {
  code?: string;
  /** llhttp's words for what it could not read, e.g. "Invalid header value char". */
  reason?: string;
}

/** The parser's reason, trimmed and without a trailing period; its code when it gave none. */
function parserReason(error: ClientErrorFields): string {
  const reason = typeof error.reason === 'string' ? error.reason.trim().replace(/\.$/, '') : '';
  return (reason || error.code || 'unreadable request').slice(0, 200);
}

/**
 * Fastify's `frameworkErrors`: a path it cannot decode or route (bad percent-encoding, a parameter
 * past maxParamLength) is refused before any hook, and would otherwise get Fastify's own error body,
 * quoting the whole URL back.
 */
export function frameworkErrorHandler(maxParamLength: number) {
  return (error: FastifyError, _request: FastifyRequest, reply: FastifyReply) => {
    const refusal =
      error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? uriTooLong(maxParamLength) : badRequest.undecodablePath();
    return reply.code(refusal.statusCode).send(refusal.toBody());
  };
}

function toApiError(
  raw: FastifyError | ApiError | Error,
  contentType: string | undefined,
  bodyLimitBytes: number,
): ApiError | undefined {
  if (raw instanceof ApiError) return raw;
  const error = raw as FastifyError;
  if (error.validation) return validationError(error.validation as never, error.validationContext ?? 'body');
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return payloadTooLarge(bodyLimitBytes);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE'
        ? unsupportedMediaType(contentType)
        : badRequest.unreadableBody(error.message);
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return badRequest.malformedJson();
  }
  if (error instanceof SyntaxError || (error.statusCode === 400 && /JSON/i.test(error.message)))
    return badRequest.malformedJson();
  if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
    return frameworkError(error.statusCode, error.message);
  }
  return undefined;
}
