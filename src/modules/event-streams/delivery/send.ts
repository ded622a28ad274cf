import { createHmac } from 'node:crypto';
import { isIP } from 'node:net';
import type { Agent, Dispatcher } from 'undici';
import { lazyModule } from '../../../lazy-module.ts';

const undici = lazyModule<typeof import('undici')>('undici');
import { redactUrl } from '../../../http/log-redaction.ts';
import { EndpointRefused, EndpointUnresolved, type EndpointGuard } from './endpoint-guard.ts';

export interface WebhookTarget {
  endpoint: string;
  /** The header carrying the stream's credentials, if any. */
  header?: [string, string];
  /** Standard Webhooks HMAC keys, newest first; none: the delivery is not signed. */
  signingKeys?: readonly Buffer[];
}

export type SendOutcome =
  | { kind: 'delivered'; durationMs: number }
  /** 4xx other than the "try later" ones, or an endpoint the guard refuses: retrying would not help. */
  | { kind: 'rejected'; durationMs: number; error: string }
  /** 408, 425, 429, 5xx, timeouts, network errors: worth retrying, not sooner than `retryAfterMs` when the endpoint said so. */
  | { kind: 'retryable'; durationMs: number; error: string; retryAfterMs?: number };

/** 4xx statuses that say "not now" rather than "never": Request Timeout, Too Early, Too Many Requests. */
const TRY_LATER = new Set([408, 425, 429]);

/**
 * How long a `Retry-After` header asks to wait (ms from `nowMs`), given as delta-seconds or an
 * HTTP-date; undefined when absent or unreadable. A date already past asks for no wait.
 */
export function retryAfterMs(header: string | string[] | undefined, nowMs = Date.now()): number | undefined {
  const value = (Array.isArray(header) ? header[0] : header)?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  // Date.parse also reads bare numbers and other shapes; each HTTP-date form begins with its weekday.
  if (Number.isNaN(at) || !/^[A-Za-z]{3}/.test(value)) return undefined;
  return Math.max(0, at - nowMs);
}

export function authHeader(
  method: string,
  publicAuth: Record<string, string>,
  secret: string | undefined,
): [string, string] | undefined {
  if (secret === undefined) return undefined;
  switch (method) {
    case 'bearer':
      return ['authorization', `Bearer ${secret}`];
    case 'basic':
      return ['authorization', `Basic ${Buffer.from(`${publicAuth.username ?? ''}:${secret}`).toString('base64')}`];
    case 'custom_header':
      return publicAuth.header_key ? [publicAuth.header_key, secret] : undefined;
    default:
      return undefined;
  }
}

/**
 * Standard Webhooks headers: `webhook-signature` holds one `v1,<base64 HMAC-SHA256>` of
 * `${id}.${timestamp}.${body}` per key, so receivers holding either secret of a rotation verify.
 */
export function signatureHeaders(
  id: string,
  timestampSeconds: number,
  body: string,
  keys: readonly Buffer[],
): Record<string, string> {
  const signed = `${id}.${timestampSeconds}.${body}`;
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': keys.map((key) => `v1,${createHmac('sha256', key).update(signed).digest('base64')}`).join(' '),
  };
}

/** The original truncates attempt errors to about 50 characters. */
export function truncate(message: string): string {
  return message.length > 50 ? `${message.slice(0, 50)} ...` : message;
}

/** Response bytes read before the connection is dropped: the body is never used, only the status. */
const BODY_READ_LIMIT = 128 * 1024;

/** What a send learnt of the response: its status and, when it asks to be tried later, its Retry-After. */
interface Response {
  status: number;
  retryAfter: string | undefined;
}

/** The send's deadline passed (the whole exchange: connecting, writing, the response's head and body). */
class SendTimeout extends Error {
  override readonly name = 'TimeoutError';
}

/**
 * POSTs events to webhooks. With a guard, connections go through an agent whose lookup vets every
 * address before connecting (see EndpointGuard); without one (development mode) any address goes.
 */
export class WebhookSender {
  private agent: Agent | undefined;

  constructor(
    private readonly guard: EndpointGuard | undefined,
    private readonly timeoutMs: number,
  ) {}

  /**
   * With a guard, its agent: made on first use, and again after `close`, so a worker that is stopped
   * and started keeps sending. Without one (development mode), the process's global dispatcher, as
   * fetch's: the embedded server's makes it trust the development CA (embed/trust.ts).
   */
  private dispatcher(): Dispatcher {
    if (this.guard === undefined) return undici().getGlobalDispatcher();
    this.agent ??= new (undici().Agent)({ connect: { lookup: this.guard.lookup } });
    return this.agent;
  }

  /** POSTs `body` (an envelope as JSON, see envelopeJson) of the event `eventId`. */
  async send(target: WebhookTarget, eventId: string, body: string): Promise<SendOutcome> {
    const started = performance.now();
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': 'tenantry-event-streams/1',
    };
    if (target.header) headers[target.header[0]] = target.header[1];
    if (target.signingKeys && target.signingKeys.length > 0) {
      Object.assign(headers, signatureHeaders(eventId, Math.floor(Date.now() / 1000), body, target.signingKeys));
    }
    try {
      const url = new URL(target.endpoint);
      // A host given as an IP address is connected to without a lookup, so it is vetted here.
      const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
      if (this.guard && isIP(host)) await this.guard.vet(host);
      const response = await this.post(url, headers, body);
      const durationMs = performance.now() - started;
      const status = response.status;
      if (status >= 200 && status < 300) return { kind: 'delivered', durationMs };
      const error = truncate(`Unexpected status code ${status} from POST ${redactUrl(target.endpoint)}`);
      if (status >= 400 && status < 500 && !TRY_LATER.has(status)) return { kind: 'rejected', durationMs, error };
      const wait = retryAfterMs(response.retryAfter);
      return { kind: 'retryable', durationMs, error, ...(wait === undefined ? {} : { retryAfterMs: wait }) };
    } catch (caught) {
      const durationMs = performance.now() - started;
      // Errors of the connection's lookup come as they are, or (from some paths) as the cause of another.
      const cause =
        caught instanceof EndpointRefused || caught instanceof EndpointUnresolved
          ? caught
          : ((caught as Error)?.cause ?? caught);
      // Spelled out in full: the operator needs the whole reason, which the 50-character cut would lose.
      if (cause instanceof EndpointRefused) return { kind: 'rejected', durationMs, error: `Refused: ${cause.message}` };
      if (cause instanceof EndpointUnresolved) return { kind: 'retryable', durationMs, error: cause.message };
      const reason = caught instanceof SendTimeout ? 'timeout' : String(cause);
      return { kind: 'retryable', durationMs, error: truncate(`Post "${redactUrl(target.endpoint)}": ${reason}`) };
    }
  }

  /**
   * The POST itself, through undici's dispatcher with a handler of its own (Exchange) rather than
   * `request` (or `fetch`, whose WHATWG layer costs more CPU per delivery than the rest of the worker
   * together): `request` makes a stream of the response body, an AbortSignal with its timer and
   * listeners, and an object of every header, for a body that is dropped and headers that are not
   * read. It follows no redirects, as the original.
   */
  private post(url: URL, headers: Record<string, string>, body: string): Promise<Response> {
    return new Promise<Response>((resolve, reject) => {
      const exchange = new Exchange(resolve, reject, this.timeoutMs);
      try {
        this.dispatcher().dispatch(
          {
            origin: url.origin,
            path: url.search ? `${url.pathname}${url.search}` : url.pathname,
            method: 'POST',
            headers,
            body,
          },
          exchange,
        );
      } catch (error) {
        exchange.onError(error as Error);
      }
    });
  }

  /** Closes the pooled connections. */
  async close(): Promise<void> {
    const agent = this.agent;
    this.agent = undefined;
    await agent?.close();
  }
}

/**
 * One POST's handler for undici's dispatcher. Resolves once the response is read (so the connection
 * is reused), or with its status once BODY_READ_LIMIT bytes of body came or the deadline passed after
 * the status; rejects with the error, or with SendTimeout when the deadline passed before the status.
 * A class, not an object of closures: one is made per delivery.
 */
class Exchange {
  private settled = false;
  private abort: ((reason: Error) => void) | undefined;
  /** Why the exchange ended early; set before undici's abort is known, it is passed on once it is. */
  private ended: Error | undefined;
  private response: Response | undefined;
  private read = 0;
  private readonly deadline: NodeJS.Timeout;

  constructor(
    private readonly resolve: (response: Response) => void,
    private readonly reject: (error: Error) => void,
    timeoutMs: number,
  ) {
    // Unref'd: a send in flight does not keep the process alive by its timer alone (its socket does).
    this.deadline = setTimeout(() => this.end(new SendTimeout()), timeoutMs).unref();
  }

  onConnect(abort: (reason: Error) => void): void {
    this.abort = abort;
    if (this.ended) abort(this.ended);
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[]): boolean {
    // 1xx heads (Early Hints…) come before the response's own.
    if (statusCode < 200) return true;
    this.response = {
      status: statusCode,
      retryAfter: statusCode >= 300 ? headerValue(rawHeaders, 'retry-after') : undefined,
    };
    // A body announced longer than what is read is not waited for (as undici's dump()).
    if (Number(headerValue(rawHeaders, 'content-length')) > BODY_READ_LIMIT) {
      this.end(new Error('response body over the read limit'));
      return false;
    }
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.read += chunk.length;
    if (this.read > BODY_READ_LIMIT) this.end(new Error('response body over the read limit'));
    return true;
  }

  onComplete(): void {
    this.finish();
  }

  onError(error: Error): void {
    this.finish(error);
  }

  /** Ends the exchange here: the connection is dropped, whatever undici reports after. */
  private end(reason: Error): void {
    this.ended ??= reason;
    this.finish(reason);
    this.abort?.(reason);
  }

  private finish(error?: Error): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.deadline);
    if (this.response) this.resolve(this.response);
    else this.reject(error!);
  }
}

/** The first value of a header among undici's raw pairs (name, value, …), its name in lower case. */
function headerValue(rawHeaders: Buffer[], name: string): string | undefined {
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.length === name.length && rawHeaders[i]!.toString('latin1').toLowerCase() === name)
      return rawHeaders[i + 1]!.toString('latin1');
  }
  return undefined;
}
