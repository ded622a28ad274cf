import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify';
import { pino } from 'pino';
import type { Logger } from '../logger.ts';
import { redactHeaders, redactUrl } from './log-redaction.ts';
import './types.ts';

/**
 * The access log: one line per request, `request completed`, written when its response is done, with
 * what operators trace a request by: the request id, method, URL (secret query values redacted), the
 * route that matched, the headers (credentials redacted), the status, the response time in ms and the
 * tenant when the Host named one. Fastify's own pair of lines (`incoming request`, `request completed`)
 * cost twice the serialising and writing for one more timestamp.
 *
 * The line is built here from plain values already redacted (log-redaction.ts), so it goes through a
 * logger without pino's path redaction, which walks every logged object per line for paths this line
 * cannot hold. Everything else a request logs (errors, warnings) still goes through `request.log`,
 * with the logger's redaction.
 */
export class AccessLog extends LogController {
  private readonly lines: Logger;

  constructor(logger: Logger) {
    super();
    // The line's members are already redacted: no redaction paths, and its `req` written as given.
    this.lines = logger.child({}, { redact: [], serializers: { req: asIs } });
  }

  override incomingRequest(): void {
    // The request is logged once, when it completes.
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) {
      // An error while sending: the logger that redacts logs it, the error being anything.
      request.log.error({ ...accessLine(request, reply), err: error }, 'request errored');
      return;
    }
    this.lines.info(accessLine(request, reply), 'request completed');
  }
}

function asIs<T>(value: T): T {
  return value;
}

function accessLine(request: FastifyRequest, reply: FastifyReply) {
  return {
    reqId: request.id,
    req: {
      method: request.method,
      url: redactUrl(request.url),
      // The template that matched (no id or email in it), for grouping; absent when none did.
      route: request.is404 ? undefined : request.routeOptions.url,
      headers: redactHeaders(request.headers),
    },
    res: { statusCode: reply.statusCode },
    responseTime: reply.elapsedTime,
    tenant: request.tenant?.id,
  };
}

/**
 * Fastify's factory of each request's logger (`request.log`, the request id bound), made at the cost
 * of one string. Fastify's default asks pino for a child with options, and pino then rebuilds its
 * formatters and runs the request id through the redaction's wildcard stringifier (a string, which
 * no path can match), a few µs a request for a logger most requests never write to. The child is
 * what pino's own child() makes without options: an object on the parent's prototype holding the
 * parent's bindings plus its own, serialised as pino does (JSON). Anything else (a route's log level
 * or serializers, a plugin's logger, other bindings) goes through pino's child() as before.
 */
export function requestLoggerFactory(): (
  parent: FastifyBaseLogger,
  bindings: pino.Bindings,
  options: pino.ChildLoggerOptions,
) => FastifyBaseLogger {
  const bindingsKey = pino.symbols.chindingsSym;
  // The parent is the app's logger on every request (Fastify's own child of the server's logger):
  // its child without bindings is made once, and again only should another parent come.
  let parentSeen: FastifyBaseLogger | undefined;
  let base: Record<symbol, string> = {};
  return (parent, bindings, options) => {
    const keys = Object.keys(bindings);
    if (
      options.level !== undefined ||
      options.serializers !== undefined ||
      keys.length !== 1 ||
      keys[0] !== 'reqId' ||
      typeof bindings.reqId !== 'string'
    )
      return parent.child(bindings, options);
    if (parent !== parentSeen) {
      parentSeen = parent;
      base = parent.child({}) as unknown as Record<symbol, string>;
    }
    const child = Object.create(base) as Record<symbol, string>;
    child[bindingsKey] = `${base[bindingsKey]},"reqId":${JSON.stringify(bindings.reqId)}`;
    return child as unknown as FastifyBaseLogger;
  };
}
