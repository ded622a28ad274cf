import assert from 'node:assert/strict';
import net from 'node:net';
import { after, describe, it, type TestContext } from 'node:test';
import { Writable } from 'node:stream';
import { MAIL_SERVER_FAILED, smtpTransport } from '../../../src/mail/transport.ts';
import { eventually } from '../../helpers/eventually.ts';
import { startTestServer } from '../../helpers/server.ts';
import { startSmtpReceiver, type SmtpReceiver } from '../../helpers/smtp-receiver.ts';

const credentials = { user: 'mailer', pass: 'smtp-password-never-in-clear' };
const email = {
  id: 'msg_1111111111111111111111',
  from: 'no-reply@tenant.example.com',
  to: 'ada@example.com',
  subject: 'Hello',
  html: '<p>Hello</p>',
};

/** Sends one email through SMTP_URL `url`, as the mail worker does. */
async function send(url: string) {
  const transport = smtpTransport(url, { timeoutMs: 5_000, concurrency: 1 });
  try {
    return await transport.send(email);
  } finally {
    transport.close();
  }
}

// The receivers speak no TLS at all: as a server that offers no STARTTLS, or whose offer someone on the
// path stripped from its greeting.
describe('the SMTP login and TLS', () => {
  const receivers: SmtpReceiver[] = [];
  after(async () => {
    for (const receiver of receivers) await receiver.close();
  });
  /** A receiver on `host`; skips the test where that loopback address cannot be listened on (macOS). */
  const receiver = async (t: TestContext, host: string, login: typeof credentials | null = credentials) => {
    try {
      const started = await startSmtpReceiver(login ?? undefined, host);
      receivers.push(started);
      return started;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EADDRNOTAVAIL') throw error;
      t.skip(`${host} is not a local address here`);
      return undefined;
    }
  };

  it('never sends credentials to a server elsewhere that offers no STARTTLS: the send fails, to be retried', async (t) => {
    const smtp = await receiver(t, '127.0.0.2');
    if (!smtp) return;
    const outcome = await send(smtp.url);
    assert.equal(outcome.kind, 'retryable');
    assert.equal((outcome as { error: string }).error, MAIL_SERVER_FAILED);
    assert.match((outcome as { cause?: string }).cause ?? '', /STARTTLS/);
    assert.equal(smtp.loginCount(), 0, 'no login was sent');
  });

  it('logs in without TLS when SMTP_URL says ?requireTLS=false', async (t) => {
    const smtp = await receiver(t, '127.0.0.2');
    if (!smtp) return;
    assert.deepEqual(await send(`${smtp.url}?requireTLS=false`), { kind: 'sent' });
    assert.equal(smtp.loginCount(), 1);
    assert.equal((await smtp.next(email.to)).subject, email.subject);
  });

  it('logs in without TLS to a relay on this machine (127.0.0.1)', async (t) => {
    const smtp = (await receiver(t, '127.0.0.1'))!;
    assert.deepEqual(await send(smtp.url), { kind: 'sent' });
    assert.equal(smtp.loginCount(), 1);
  });

  it('exempts addresses, not names: a relay named localhost gets no login in clear (DNS would choose where it goes)', async (t) => {
    const smtp = (await receiver(t, '127.0.0.1'))!;
    const named = new URL(smtp.url);
    named.hostname = 'localhost';
    const outcome = await send(named.href);
    assert.equal(outcome.kind, 'retryable');
    assert.equal(smtp.loginCount(), 0);
    // Nor through a proxy option, which sends the connection elsewhere whatever the host says.
    assert.equal((await send(`${smtp.url}?proxy=${encodeURIComponent('socks5://127.0.0.1:9')}`)).kind, 'retryable');
    assert.equal(smtp.loginCount(), 0);
  });

  it('sends without TLS to a server elsewhere when there is no login to protect', async (t) => {
    const smtp = await receiver(t, '127.0.0.2', null);
    if (!smtp) return;
    assert.deepEqual(await send(smtp.url), { kind: 'sent' });
    assert.equal(smtp.loginCount(), 0);
  });
});

describe('what a failed send tells the tenant and the operator', () => {
  it("a refused login or an unreachable server: a fixed reason for the tenant, the mail server's own words as the cause", async () => {
    const smtp = await startSmtpReceiver(credentials);
    try {
      const wrong = new URL(smtp.url);
      wrong.password = 'not-the-password';
      const refused = await send(wrong.href);
      assert.equal(refused.kind, 'retryable');
      assert.equal((refused as { error: string }).error, MAIL_SERVER_FAILED);
      assert.match((refused as { cause?: string }).cause ?? '', /Invalid login|535/);

      const closed = new URL(smtp.url);
      await smtp.close();
      const unreachable = await send(closed.href);
      assert.equal(unreachable.kind, 'retryable');
      assert.equal((unreachable as { error: string }).error, MAIL_SERVER_FAILED);
      assert.match((unreachable as { cause?: string }).cause ?? '', /ECONNREFUSED/);
    } finally {
      await smtp.close().catch(() => undefined);
    }
  });

  it('a server that refuses at its greeting (554): the fixed reason, retried; an envelope nodemailer refuses: final, its own words', async () => {
    const refusing = net.createServer((socket) => socket.end('554 5.7.1 This relay does not serve you\r\n'));
    await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve));
    try {
      const url = `smtp://127.0.0.1:${(refusing.address() as net.AddressInfo).port}`;
      const greeting = await send(url);
      assert.deepEqual([greeting.kind, (greeting as { error: string }).error], ['retryable', MAIL_SERVER_FAILED]);
      assert.match((greeting as { cause?: string }).cause ?? '', /554/);
    } finally {
      await new Promise<void>((resolve) => refusing.close(() => resolve()));
    }
    const smtp = await startSmtpReceiver(credentials);
    try {
      const transport = smtpTransport(smtp.url, { timeoutMs: 5_000, concurrency: 1 });
      const noRecipient = await transport.send({ ...email, to: '' }).finally(() => transport.close());
      assert.equal(noRecipient.kind, 'rejected');
      assert.match((noRecipient as { error: string }).error, /recipient/i);
      assert.equal((noRecipient as { cause?: string }).cause, undefined);
    } finally {
      await smtp.close();
    }
  });

  it("a refusal of the email itself: the mail server's reply, for the tenant", async () => {
    const smtp = await startSmtpReceiver(credentials);
    try {
      smtp.refuseNext(1, 550, 'No such mailbox here');
      const refused = await send(smtp.url);
      assert.equal(refused.kind, 'rejected');
      assert.match((refused as { error: string }).error, /550 No such mailbox here/);
      assert.equal((refused as { cause?: string }).cause, undefined);
    } finally {
      await smtp.close();
    }
  });

  it('a server whose login is refused: the outbox shows the fixed reason, the server log the cause, neither the password', async () => {
    const smtp = await startSmtpReceiver(credentials);
    const lines: Array<Record<string, unknown>> = [];
    const logStream = new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split('\n')) if (line !== '') lines.push(JSON.parse(line));
        done();
      },
    });
    const wrong = new URL(smtp.url);
    wrong.password = 'wrong-smtp-password-4d1c';
    const server = await startTestServer(
      'sqlite',
      { SMTP_URL: wrong.href, MAIL_POLL_MS: '50', MAIL_RETRY_SCHEDULE_MS: '60000', LOG_LEVEL: 'info' },
      { logStream },
    );
    try {
      const created = await server.request({
        method: 'POST',
        url: '/api/v2/users',
        payload: {
          connection: 'Username-Password-Authentication',
          email: 'ada@example.com',
          password: 'correct horse battery',
          verify_email: true,
        },
      });
      assert.equal(created.statusCode, 201, created.body);
      const email = await eventually('the first attempt recorded', async () => {
        const outbox = (await server.request({ url: '/api/v2/emails/outbox' })).json();
        const found = outbox.emails.find((e: { to: string; attempts: number }) => e.to === 'ada@example.com');
        return found?.attempts === 1 ? found : undefined;
      });
      assert.equal(email.status, 'pending');
      assert.equal(email.last_error, MAIL_SERVER_FAILED);
      const logged = await eventually('the cause logged', async () =>
        lines.find((line) => line.msg === 'mail outbox: the mail server failed a send'),
      );
      assert.equal(logged.level, 40);
      assert.equal(logged.email, email.id);
      assert.match(String(logged.error), /Invalid login|535/);
      const everything = JSON.stringify(lines) + JSON.stringify(email);
      assert.ok(!everything.includes(credentials.pass) && !everything.includes('wrong-smtp-password-4d1c'));
    } finally {
      await server.close();
      await smtp.close();
    }
  });
});
