import assert from 'node:assert/strict';
import net from 'node:net';
import { after, describe, it } from 'node:test';
import { rootCertificates } from 'node:tls';
import { Agent, getGlobalDispatcher, setGlobalDispatcher } from 'undici';
import { WebhookSender } from '../../../../src/modules/event-streams/delivery/send.ts';
import { createCertificateAuthority, issueServerCertificate } from '../../../../src/tls/dev-ca.ts';
import { startWebhookReceiver } from '../../../helpers/webhook-receiver.ts';
import { freePort } from '../../../helpers/server-process.ts';

/**
 * A webhook endpoint on a raw socket, answering each POST with `answer` (written as given, so a test
 * can send what no HTTP library would: a head without its body, a body without end, 1xx heads).
 */
async function rawEndpoint(answer: (socket: net.Socket, request: number) => void) {
  const sockets = new Set<net.Socket>();
  let connections = 0;
  let requests = 0;
  const closed: Array<Promise<void>> = [];
  const server = net.createServer((socket) => {
    connections++;
    sockets.add(socket);
    closed.push(new Promise((resolve) => socket.on('close', () => resolve())));
    let buffered = '';
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('latin1');
      // One request per head and its body (content-length), as undici sends them.
      for (;;) {
        const headEnd = buffered.indexOf('\r\n\r\n');
        if (headEnd < 0) return;
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(buffered.slice(0, headEnd))?.[1] ?? 0);
        if (buffered.length < headEnd + 4 + length) return;
        buffered = buffered.slice(headEnd + 4 + length);
        answer(socket, ++requests);
      }
    });
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/hook`,
    connections: () => connections,
    requests: () => requests,
    open: () => sockets.size,
    /** Resolves once every connection made so far is closed. */
    allClosed: () => Promise.all(closed).then(() => undefined),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

const body = '{"id":"evt_1"}';

describe('WebhookSender', () => {
  const senders: WebhookSender[] = [];
  const sender = (timeoutMs = 2_000) => {
    const made = new WebhookSender(undefined, timeoutMs);
    senders.push(made);
    return made;
  };
  after(async () => {
    for (const made of senders) await made.close();
  });

  it('delivers on a 2xx and sends the next POST on the same connection once the body is read', async () => {
    const endpoint = await rawEndpoint((socket) =>
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-type: text/plain\r\n\r\nthank'),
    );
    try {
      const webhooks = sender();
      for (let i = 0; i < 6; i++) {
        const outcome = await webhooks.send({ endpoint: endpoint.url }, 'evt_1', body);
        assert.equal(outcome.kind, 'delivered', JSON.stringify(outcome));
      }
      assert.equal(endpoint.requests(), 6);
      // undici's pool may open a second connection while the first is being released: not one per POST.
      assert.ok(endpoint.connections() <= 2, `${endpoint.connections()} connections for six POSTs in turn`);
    } finally {
      await endpoint.close();
    }
  });

  it('reads past 1xx heads to the response', async () => {
    const endpoint = await rawEndpoint((socket) =>
      socket.write('HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n'),
    );
    try {
      const outcome = await sender().send({ endpoint: endpoint.url }, 'evt_1', body);
      assert.equal(outcome.kind, 'delivered', JSON.stringify(outcome));
    } finally {
      await endpoint.close();
    }
  });

  it("reads a try-later status's Retry-After whatever the case of its name, and a 3xx is tried again", async () => {
    const answers = [
      'HTTP/1.1 503 Service Unavailable\r\nRETRY-AFTER: 7\r\ncontent-length: 0\r\n\r\n',
      'HTTP/1.1 429 Too Many Requests\r\nx-other: 1\r\nretry-after: 120\r\ncontent-length: 2\r\n\r\nno',
      'HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:1/elsewhere\r\ncontent-length: 0\r\n\r\n',
      'HTTP/1.1 400 Bad Request\r\nretry-after: 5\r\ncontent-length: 0\r\n\r\n',
    ];
    const endpoint = await rawEndpoint((socket, request) => socket.write(answers[request - 1]!));
    try {
      const webhooks = sender();
      const outcomes = [];
      for (let i = 0; i < answers.length; i++)
        outcomes.push(await webhooks.send({ endpoint: endpoint.url }, 'e', body));
      assert.deepEqual(
        outcomes.map((outcome) => [outcome.kind, 'retryAfterMs' in outcome ? outcome.retryAfterMs : undefined]),
        [
          ['retryable', 7_000],
          ['retryable', 120_000],
          ['retryable', undefined],
          ['rejected', undefined],
        ],
      );
      assert.match((outcomes[2] as { error: string }).error, /^Unexpected status code 302 from POST http:/);
      assert.equal(endpoint.requests(), 4, 'the redirect was not followed');
    } finally {
      await endpoint.close();
    }
  });

  it('ends a send that has no answer at its deadline, as a retryable timeout, and drops the connection', async () => {
    const endpoint = await rawEndpoint(() => undefined);
    try {
      const started = performance.now();
      const outcome = await sender(300).send({ endpoint: endpoint.url }, 'evt_1', body);
      const took = performance.now() - started;
      assert.equal(outcome.kind, 'retryable');
      assert.match((outcome as { error: string }).error, /^Post "http:\/\/127\.0\.0\.1:\d+\/hook": timeout$/);
      assert.ok(took >= 290 && took < 2_000, `took ${took} ms`);
      await endpoint.allClosed();
      assert.equal(endpoint.open(), 0);
    } finally {
      await endpoint.close();
    }
  });

  it('counts a status whose body never ends by the status, at the deadline, and drops the connection', async () => {
    const dribbles = new Set<NodeJS.Timeout>();
    const endpoint = await rawEndpoint((socket) => {
      // Within the read limit: the body is read as it comes, until the deadline.
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n');
      const dribble = setInterval(() => socket.write('x'), 20);
      dribbles.add(dribble);
      socket.on('close', () => clearInterval(dribble));
    });
    try {
      const started = performance.now();
      const outcome = await sender(300).send({ endpoint: endpoint.url }, 'evt_1', body);
      const took = performance.now() - started;
      assert.equal(outcome.kind, 'delivered', JSON.stringify(outcome));
      assert.ok(took >= 290 && took < 2_000, `took ${took} ms`);
      await endpoint.allClosed();
    } finally {
      for (const dribble of dribbles) clearInterval(dribble);
      await endpoint.close();
    }
  });

  for (const [how, head] of [
    ['announced', 'HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4194304\r\n\r\n'],
    ['chunked', 'HTTP/1.1 500 Internal Server Error\r\ntransfer-encoding: chunked\r\n\r\n400000\r\n'],
  ] as const) {
    it(`reads no more than 128 KiB of a body (${how}): the status counts and the connection is dropped`, async () => {
      const endpoint = await rawEndpoint((socket, request) => {
        if (request > 1) return void socket.write('HTTP/1.1 204 No Content\r\n\r\n');
        // 4 MiB, written at once: far past the read limit.
        socket.write(head);
        socket.write(Buffer.alloc(4 * 1024 * 1024, 0x61));
      });
      try {
        const webhooks = sender(10_000);
        const started = performance.now();
        const outcome = await webhooks.send({ endpoint: endpoint.url }, 'evt_1', body);
        assert.equal(outcome.kind, 'retryable', JSON.stringify(outcome));
        assert.match((outcome as { error: string }).error, /^Unexpected status code 500/);
        assert.ok(performance.now() - started < 5_000, 'answered long before the deadline');
        await endpoint.allClosed();
        // The next POST goes on a connection of its own.
        assert.equal((await webhooks.send({ endpoint: endpoint.url }, 'evt_2', body)).kind, 'delivered');
        assert.equal(endpoint.requests(), 2);
      } finally {
        await endpoint.close();
      }
    });
  }

  it('reports a refused connection as retryable, with the reason', async () => {
    const outcome = await sender().send({ endpoint: `http://127.0.0.1:${await freePort()}/hook` }, 'evt_1', body);
    assert.equal(outcome.kind, 'retryable');
    assert.match((outcome as { error: string }).error, /^Post "http:\/\/127\.0\.0\.1:\d+\/hook": Error: connect /);
  });

  it("sends through the process's global dispatcher without a guard (development mode), as the embedded server sets it", async () => {
    const ca = createCertificateAuthority();
    const receiver = await startWebhookReceiver({ tls: issueServerCertificate(ca, ['127.0.0.1']) });
    const before = getGlobalDispatcher();
    const trusting = new Agent({ connect: { ca: [...rootCertificates, ca.cert] } });
    try {
      const endpoint = receiver.url;
      // Without the CA the receiver's certificate is refused.
      const untrusted = await sender().send({ endpoint }, 'evt_1', body);
      assert.equal(untrusted.kind, 'retryable', JSON.stringify(untrusted));
      // embed/trust.ts replaces the global dispatcher with one trusting the development CA: sends follow it.
      setGlobalDispatcher(trusting);
      const trusted = await sender().send({ endpoint }, 'evt_2', body);
      assert.equal(trusted.kind, 'delivered', JSON.stringify(trusted));
    } finally {
      setGlobalDispatcher(before);
      await trusting.close();
      await receiver.close();
    }
  });

  it('sends the path and query, never the userinfo or the fragment', async () => {
    const heads: string[] = [];
    const server = net.createServer((socket) => {
      socket.on('data', (chunk: Buffer) => {
        heads.push(chunk.toString('latin1').split('\r\n\r\n')[0]!);
        socket.end('HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n');
      });
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    try {
      const outcome = await sender().send(
        { endpoint: `http://user:pw@127.0.0.1:${port}/a/b?x=1&y=%20#frag` },
        'evt_1',
        body,
      );
      assert.equal(outcome.kind, 'delivered', JSON.stringify(outcome));
      assert.equal(heads.length, 1);
      const [requestLine, ...headerLines] = heads[0]!.split('\r\n');
      assert.equal(requestLine, 'POST /a/b?x=1&y=%20 HTTP/1.1');
      const names = headerLines.map((line) => line.slice(0, line.indexOf(':')).toLowerCase());
      assert.ok(!names.includes('authorization'), heads[0]);
      assert.ok(!heads[0]!.includes('frag') && !heads[0]!.includes('pw'), heads[0]);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
