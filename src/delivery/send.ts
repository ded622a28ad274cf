import { fetch } from 'undici';
import type { Envelope } from '../modules/event-streams/envelope.ts';

export interface WebhookTarget {
  endpoint: string;
  /** The header carrying the stream's credentials, if any. */
  header?: [string, string];
}

export type SendOutcome =
  | { kind: 'delivered'; durationMs: number }
  /** 4xx: the endpoint refused the event; retrying would not help. */
  | { kind: 'rejected'; durationMs: number; error: string }
  /** 5xx, timeouts, network errors: worth retrying. */
  | { kind: 'retryable'; durationMs: number; error: string };

export function authHeader(method: string, publicAuth: Record<string, string>, secret: string | undefined): [string, string] | undefined {
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

/** The original truncates attempt errors to about 50 characters. */
export function truncate(message: string): string {
  return message.length > 50 ? `${message.slice(0, 50)} ...` : message;
}

export async function send(target: WebhookTarget, event: Envelope, timeoutMs: number): Promise<SendOutcome> {
  const started = performance.now();
  const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': 'tenantry-event-streams/1' };
  if (target.header) headers[target.header[0]] = target.header[1];
  try {
    const response = await fetch(target.endpoint, {
      method: 'POST',
      headers,
      body: JSON.stringify(event),
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    // The body is not needed; draining it frees the connection for reuse.
    await response.body?.cancel().catch(() => undefined);
    const durationMs = performance.now() - started;
    if (response.status >= 200 && response.status < 300) return { kind: 'delivered', durationMs };
    const error = truncate(`Unexpected status code ${response.status} from POST ${target.endpoint}`);
    if (response.status >= 400 && response.status < 500) return { kind: 'rejected', durationMs, error };
    return { kind: 'retryable', durationMs, error };
  } catch (cause) {
    const durationMs = performance.now() - started;
    const reason = cause instanceof Error && cause.name === 'TimeoutError' ? 'timeout' : String((cause as Error)?.cause ?? cause);
    return { kind: 'retryable', durationMs, error: truncate(`Post "${target.endpoint}": ${reason}`) };
  }
}
