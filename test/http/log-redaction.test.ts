import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { WebhookSender } from '../../src/modules/event-streams/delivery/send.ts';
import { CENSOR, redactUrl } from '../../src/http/log-redaction.ts';
import { createTestDatabase, databaseKinds } from '../helpers/databases.ts';
import { freePort } from '../helpers/server-process.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

describe('redactUrl', () => {
  it('returns a URL without a query or user-info as it is', () => {
    for (const url of ['/api/v2/users', '/', 'https://hooks.example/x', '/api/v2/users/auth0%7C1@x'])
      assert.equal(redactUrl(url), url);
  });

  it('replaces the values of secret parameters, whatever their case or escaping, and keeps the rest', () => {
    assert.equal(redactUrl('/u/email-verification?ticket=abc'), '/u/email-verification?ticket=[redacted]');
    assert.equal(
      redactUrl(
        '/x?q=1&Token=a&CLIENT_SECRET=b&access_token=c&code=d&password=e&sessionToken=f&x-api-key=g&client%5Fsecret=h&take=5#frag',
      ),
      '/x?q=1&Token=[redacted]&CLIENT_SECRET=[redacted]&access_token=[redacted]&code=[redacted]&password=[redacted]' +
        '&sessionToken=[redacted]&x-api-key=[redacted]&client%5Fsecret=[redacted]&take=5#frag',
    );
    assert.equal(
      redactUrl('/api/v2/users-by-email?email=a%40b.co&fields=user_id'),
      '/api/v2/users-by-email?email=a%40b.co&fields=user_id',
    );
    assert.equal(redactUrl('/x?token&=v&a=b=c'), '/x?token&=v&a=b=c');
  });

  it('reads names as parsers do: brackets, stray characters, other separators and the fragment', () => {
    assert.equal(
      redactUrl('/x?client_secret[]=Q1&a=1;token=Q2&password%5B%5D=Q3&ticket%20=Q4&x_token%00=Q6&token.=Q7'),
      '/x?client_secret[]=[redacted]&a=1;token=[redacted]&password%5B%5D=[redacted]&ticket%20=[redacted]&x_token%00=[redacted]&token.=[redacted]',
    );
    assert.equal(redactUrl('/u/email-verification?x=1#&ticket=HASH'), '/u/email-verification?x=1#&ticket=[redacted]');
    assert.equal(
      redactUrl('/cb?code=C&session_id=S&id_token_hint=H&state=keep'),
      '/cb?code=[redacted]&session_id=[redacted]&id_token_hint=[redacted]&state=keep',
    );
  });

  it('reads a name of many brackets and a line break in time linear in its length (a client may send one in any URL)', () => {
    // Quadratic, 100,000 brackets took about 15 s; linear, a few ms. The bound leaves room for a slow machine.
    const name = `${'['.repeat(100_000)}%0A`;
    const started = performance.now();
    assert.equal(
      redactUrl(`/x?${name}=1&ticket[${'['.repeat(100_000)}%0A=secret`),
      `/x?${name}=1&ticket[${'['.repeat(100_000)}%0A=${CENSOR}`,
    );
    assert.ok(performance.now() - started < 1_000, `${Math.round(performance.now() - started)} ms`);
  });

  it('replaces the user-info of an absolute URL', () => {
    assert.equal(
      redactUrl('https://user:pass@hooks.example/x?secret=s'),
      'https://[redacted]@hooks.example/x?secret=[redacted]',
    );
  });
});

for (const kind of databaseKinds()) {
  describe(`request logs carry no secret query values (${kind})`, () => {
    let server: TestServer;
    const logLines: string[] = [];
    before(async () => {
      const logStream = new PassThrough();
      logStream.on('data', (chunk: Buffer) => logLines.push(...chunk.toString().split('\n').filter(Boolean)));
      server = await startTestServer(kind, { LOG_LEVEL: 'info' }, { logStream });
    });
    after(() => server.close());

    it('logs the path of an email-verification link but never its ticket, nor tokens or secrets in other URLs', async () => {
      const payload = {
        connection: 'Username-Password-Authentication',
        email: 'logged@example.com',
        password: 'Str0ng!passw0rd',
      };
      const user = await server.request({ method: 'POST', url: '/api/v2/users', payload });
      assert.equal(user.statusCode, 201, user.body);
      const created = await server.request({
        method: 'POST',
        url: '/api/v2/tickets/email-verification',
        payload: { user_id: user.json().user_id },
      });
      assert.equal(created.statusCode, 201, created.body);
      const link = new URL(created.json().ticket as string);
      const ticket = link.searchParams.get('ticket')!;
      const redeemed = await server.app.inject({
        method: 'GET',
        url: `${link.pathname}${link.search}`,
        headers: { host: link.host, referer: link.href },
      });
      assert.ok(redeemed.statusCode < 400, redeemed.body);

      const secrets = ['tok-3f9a1c77e2', 'cs-77b2d0e5aa', 'at-1c9e44b0f3'];
      await server.request({
        url: '/api/v2/users',
        headers: {
          'proxy-authorization': `Basic ${secrets[1]}`,
          'x-api-key': secrets[2],
          'x-session-token': secrets[0],
        },
      });
      for (const url of [
        `/api/v2/users?token=${secrets[0]}&client_secret=${secrets[1]}`,
        `/nowhere?Access_Token=${secrets[2]}`,
        `/api/v2/users?per_page=notanumber&token=${secrets[0]}`,
      ])
        await server.request({ url });

      const all = logLines.join('\n');
      for (const secret of [ticket, ...secrets]) assert.ok(!all.includes(secret), `${secret} appears in the logs`);
      const urls = logLines
        .map((l) => JSON.parse(l))
        .filter((l) => l.req)
        .map((l) => l.req.url as string);
      assert.ok(urls.includes('/u/email-verification?ticket=[redacted]'), urls.join(' '));
      assert.ok(urls.includes('/api/v2/users?token=[redacted]&client_secret=[redacted]'), urls.join(' '));
      assert.ok(urls.includes('/nowhere?Access_Token=[redacted]'), urls.join(' '));
    });
  });
}

describe('a request the HTTP parser refuses is logged without its bytes', () => {
  it("logs the parser's code and reason at debug, never the token the request carried", async () => {
    const logLines: string[] = [];
    const logStream = new PassThrough();
    logStream.on('data', (chunk: Buffer) => logLines.push(...chunk.toString().split('\n').filter(Boolean)));
    const server = await startTestServer('sqlite', { LOG_LEVEL: 'trace' }, { logStream });
    try {
      await server.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = server.app.server.address() as net.AddressInfo;
      const token = 'tok-91c2e7a4b8d0';
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = net.connect(port, '127.0.0.1');
        let received = '';
        socket.on('data', (chunk) => (received += chunk.toString('latin1')));
        socket.on('error', reject);
        socket.on('close', () => resolve(received));
        socket.write(
          `GET /api/v2/users HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${token}\r\nBad Header: x\r\n\r\n`,
        );
      });
      assert.match(answer, /^HTTP\/1\.1 400 /);
      await new Promise((resolve) => setImmediate(resolve));
      const refused = logLines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request refused by the HTTP parser');
      assert.equal(refused.length, 1, logLines.join('\n'));
      assert.equal(refused[0].code, 'HPE_INVALID_HEADER_TOKEN');
      assert.equal(typeof refused[0].reason, 'string');
      const all = logLines.join('\n');
      assert.ok(!all.includes(token), 'the token appears in the logs');
      assert.ok(!all.includes('rawPacket'), "the request's bytes appear in the logs");
    } finally {
      await server.close();
    }
  });
});

describe('webhook delivery errors carry no secret query values', () => {
  it('reports the endpoint of a failed delivery with its secret values replaced', async () => {
    const sender = new WebhookSender(undefined, 2_000);
    try {
      // Nothing listens there: the connection is refused, and the error names the endpoint.
      const endpoint = `http://127.0.0.1:${await freePort()}/?token=S3CR3T`;
      const outcome = await sender.send({ endpoint }, 'evt_1', '{"id":"evt_1"}');
      assert.ok(outcome.kind === 'retryable', JSON.stringify(outcome));
      assert.ok(!outcome.error.includes('S3CR3T'), outcome.error);
      assert.match(outcome.error, /^Post "http:\/\/127\.0\.0\.1:\d+\/\?token=\[redacted\]/);
    } finally {
      await sender.close();
    }
  });
});

describe('first start', () => {
  it('keeps the generated admin secret in its 0600 file, out of a non-terminal stdout and of every JSON log line', async () => {
    const database = await createTestDatabase('sqlite');
    const port = await freePort();
    const child = spawn(process.execPath, ['bin/tenantry.mjs', 'serve'], {
      env: {
        ...process.env,
        PORT: String(port),
        DATA_DIR: database.dataDir,
        TENANT_DOMAIN: 'first.test',
        LOG_LEVEL: 'info',
        DATABASE_URL: '',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      // A session of its own: no controlling terminal, as under a service manager or in a container.
      detached: true,
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    try {
      for (let i = 0; i < 300 && !output.includes('API reference'); i++) await new Promise((r) => setTimeout(r, 50));
      const file = path.join(database.dataDir, 'admin-client.json');
      const { client_id: clientId, client_secret: secret } = JSON.parse(fs.readFileSync(file, 'utf8')) as {
        client_id: string;
        client_secret: string;
      };
      assert.equal(fs.statSync(file).mode & 0o777, 0o600);
      assert.ok(!output.includes(secret), 'stdout is a log stream here: the secret is not printed');
      assert.ok(output.includes(file), 'the operator is told where the credentials are');
      // A client that puts its credentials in a query string still keeps them out of the logs.
      const query = `client_id=${clientId}&client_secret=${encodeURIComponent(secret)}&grant_type=client_credentials`;
      await fetch(`http://127.0.0.1:${port}/oauth/token?${query}`, { method: 'POST', headers: { host: 'first.test' } });
      await fetch(`http://127.0.0.1:${port}/api/v2/users?access_token=${encodeURIComponent(secret)}`, {
        headers: { host: 'first.test' },
      });
      child.kill('SIGTERM');
      await exited;
      const jsonLines = output.split('\n').filter((line) => line.startsWith('{'));
      assert.ok(
        jsonLines.some((line) => line.includes('"request completed"')),
        'requests were logged',
      );
      for (const line of jsonLines)
        assert.ok(!line.includes(secret) && !line.includes(encodeURIComponent(secret)), line);
    } finally {
      child.kill('SIGKILL');
      await exited;
      await database.drop();
    }
  });
});
