/** Node's own limit for a request's headers, kept when the whole request may take longer. */
const HEADERS_MS = 60_000;
/** Node's own interval between its checks of every connection's request, kept unless the limits are shorter. */
const CHECK_MS = 30_000;

/**
 * How long a client may take to send a request: its headers within min(60 s, `requestTimeoutMs`) and the
 * whole of it within `requestTimeoutMs`, or Node's HTTP server refuses it (408 request_timeout, through
 * clientErrorHandler) and closes the connection. Without these a client dripping a byte now and then
 * keeps its connection and its request's memory for as long as it likes: every byte is activity to the
 * socket's own timer (stalled-responses.ts), and Fastify turns Node's default request timeout off.
 * Node looks at each connection every quarter of the shorter limit, at most every 30 s (its default), so
 * a request is refused within 1.25 × its limit. The timer stops once the request has arrived: a handler
 * may take as long as it needs.
 */
export function requestTimeouts(requestTimeoutMs: number): {
  requestTimeout: number;
  headersTimeout: number;
  connectionsCheckingInterval: number;
} {
  const headersTimeout = Math.min(HEADERS_MS, requestTimeoutMs);
  return {
    requestTimeout: requestTimeoutMs,
    headersTimeout,
    connectionsCheckingInterval: Math.min(CHECK_MS, Math.ceil(headersTimeout / 4)),
  };
}
