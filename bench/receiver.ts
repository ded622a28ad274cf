/**
 * The webhook endpoint of the delivery benchmarks: a node:http server on 127.0.0.1 answering 204 to
 * every POST once its body is read, as a fast receiver would. It counts what it receives, and the
 * distinct (path, event id) pairs among it: a duplicate is a delivery sent twice. With `record` as the only
 * argument it also keeps, per request, the event's id, time and user email with the receipt time.
 * GET /bench/stats and GET /bench/received report, POST /bench/reset clears; any other POST is a
 * delivery. Prints `READY {"port"}`; stops on SIGTERM.
 */
import http from 'node:http';
import { serveAsChild } from './child-server.ts';

interface Received {
  id: string;
  /** The event's `time` (when the change committed), epoch ms. */
  eventTime: number;
  email: string | undefined;
  /** Receipt, epoch ms with sub-millisecond precision (the same clock as the load generator's). */
  at: number;
}

const recording = process.argv[2] === 'record';
const wallClock = () => performance.timeOrigin + performance.now();

let count = 0;
/** TCP connections accepted: few means the sender reuses its connections. */
let connections = 0;
let first = 0;
let last = 0;
let ids = new Set<string>();
let received: Received[] = [];

const server = http.createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    if (request.url?.startsWith('/bench/')) {
      control(request, response);
      return;
    }
    const at = wallClock();
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    count++;
    if (first === 0) first = at;
    last = at;
    // One event goes to every stream (each POSTs to its own path) with the same id. The envelope's
    // first member is its id ({"id":"evt_…"}): read without parsing the whole body.
    const start = body.indexOf('"id":"') + 6;
    ids.add(`${request.url} ${body.toString('latin1', start, body.indexOf('"', start))}`);
    if (recording) {
      const event = JSON.parse(body.toString('utf8')) as {
        id: string;
        time: string;
        data?: { object?: { email?: string } };
      };
      received.push({ id: event.id, eventTime: Date.parse(event.time), email: event.data?.object?.email, at });
    }
    response.writeHead(204);
    response.end();
  });
});

function control(request: http.IncomingMessage, response: http.ServerResponse): void {
  if (request.method === 'POST' && request.url === '/bench/reset') {
    count = 0;
    connections = 0;
    first = 0;
    last = 0;
    ids = new Set();
    received = [];
    response.writeHead(204);
    response.end();
    return;
  }
  const body = request.url === '/bench/received' ? received : { count, distinct: ids.size, connections, first, last };
  response.writeHead(200, { 'content-type': 'application/json' });
  response.end(JSON.stringify(body));
}

server.on('connection', () => connections++);
server.keepAliveTimeout = 60_000;
serveAsChild(server);
