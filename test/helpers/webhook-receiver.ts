import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  json(): any;
  at: number;
}

export interface WebhookReceiver {
  url: string;
  requests: ReceivedRequest[];
  /** Statuses answered to the next requests, in order; after the last, `fallback`. */
  program(statuses: number[], fallback?: number): void;
  /** Waits until `predicate` holds over the requests received, or fails after `timeoutMs`. */
  waitFor(predicate: (requests: ReceivedRequest[]) => boolean, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

/** A real HTTP endpoint on 127.0.0.1 that records every request and answers programmed statuses. */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const requests: ReceivedRequest[] = [];
  let queue: number[] = [];
  let fallback = 204;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, json: () => JSON.parse(body), at: Date.now() });
      res.statusCode = queue.shift() ?? fallback;
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    requests,
    program(statuses, next = 204) {
      queue = [...statuses];
      fallback = next;
    },
    async waitFor(predicate, timeoutMs = 5000) {
      await waitUntil(() => predicate(requests), timeoutMs, () => `webhook receiver: condition not met; got ${requests.length} requests`);
      return requests;
    },
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/** Polls `condition` every 10 ms until it holds; fails after `timeoutMs`. */
export async function waitUntil(condition: () => boolean | Promise<boolean>, timeoutMs = 5000, describe: () => string = () => 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (Date.now() > deadline) throw new Error(`timed out: ${describe()}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
