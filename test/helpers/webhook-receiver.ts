import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  json(): any;
  at: number;
  /** The sender's end of the connection: which process sent it can be told from this port. */
  remotePort: number;
}

/** An answer to program: a status, or a status with headers (e.g. `retry-after`). */
export type ProgrammedAnswer = number | { status: number; headers: Record<string, string> };

export interface WebhookReceiver {
  url: string;
  requests: ReceivedRequest[];
  /** Statuses answered to the next requests, in order; after the last, `fallback`. */
  program(statuses: ProgrammedAnswer[], fallback?: number): void;
  /** Runs before each answer: a hook that waits makes a slow or stuck endpoint. */
  beforeAnswer(hook: ((request: ReceivedRequest) => Promise<void> | void) | undefined): void;
  /** Waits until `predicate` holds over the requests received, or fails after `timeoutMs`. */
  waitFor(predicate: (requests: ReceivedRequest[]) => boolean, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

/**
 * A real HTTP endpoint on 127.0.0.1 that records every request and answers programmed statuses.
 * `keep: false` records nothing (for floods of requests, counted by a `beforeAnswer` hook instead).
 * `tls` makes it an HTTPS endpoint with that certificate (e.g. one issued by the development CA).
 */
export async function startWebhookReceiver(
  options: { keep?: boolean; tls?: { cert: string; key: string } } = {},
): Promise<WebhookReceiver> {
  const requests: ReceivedRequest[] = [];
  let queue: ProgrammedAnswer[] = [];
  let fallback = 204;
  let hook: ((request: ReceivedRequest) => Promise<void> | void) | undefined;
  const server = options.tls ? https.createServer(options.tls) : http.createServer();
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const request = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body,
        json: () => JSON.parse(body),
        at: Date.now(),
        remotePort: req.socket.remotePort ?? 0,
      };
      if (options.keep !== false) requests.push(request);
      await hook?.(request);
      const answer = queue.shift() ?? fallback;
      if (typeof answer === 'number') res.statusCode = answer;
      else res.writeHead(answer.status, answer.headers);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}/hook`,
    requests,
    program(statuses, next = 204) {
      queue = [...statuses];
      fallback = next;
    },
    beforeAnswer(next) {
      hook = next;
    },
    async waitFor(predicate, timeoutMs = 5000) {
      await waitUntil(
        () => predicate(requests),
        timeoutMs,
        () => `webhook receiver: condition not met; got ${requests.length} requests`,
      );
      return requests;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Polls `condition` every 10 ms until it holds; fails after `timeoutMs`. */
export async function waitUntil(
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 5000,
  describe: () => string = () => 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (Date.now() > deadline) throw new Error(`timed out: ${describe()}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * A receiver's check, written from the Standard Webhooks specification alone: HMAC-SHA256 keyed by
 * the base64 part of `whsec_…`, over `${webhook-id}.${webhook-timestamp}.${raw body}`, compared with
 * each space-separated `v1,<base64>` entry of webhook-signature.
 */
export function verifies(headers: http.IncomingHttpHeaders, body: string, secret: string): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key)
    .update(`${headers['webhook-id']}.${headers['webhook-timestamp']}.${body}`, 'utf8')
    .digest();
  return String(headers['webhook-signature'] ?? '')
    .split(' ')
    .some((entry) => {
      const [version, signature = ''] = entry.split(',');
      const given = Buffer.from(signature, 'base64');
      return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected);
    });
}
