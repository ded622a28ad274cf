import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { smtpTransport } from '../../../src/mail/transport.ts';
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
  const receiver = async (host: string) => {
    const started = await startSmtpReceiver(credentials, host);
    receivers.push(started);
    return started;
  };

  it('never sends credentials to a server elsewhere that offers no STARTTLS: the send fails, to be retried', async () => {
    const smtp = await receiver('127.0.0.2');
    const outcome = await send(smtp.url);
    assert.equal(outcome.kind, 'retryable');
    assert.match((outcome as { error: string }).error, /STARTTLS/);
    assert.equal(smtp.loginCount(), 0, 'no login was sent');
  });

  it('logs in without TLS when SMTP_URL says ?requireTLS=false', async () => {
    const smtp = await receiver('127.0.0.2');
    assert.deepEqual(await send(`${smtp.url}?requireTLS=false`), { kind: 'sent' });
    assert.equal(smtp.loginCount(), 1);
    assert.equal((await smtp.next(email.to)).subject, email.subject);
  });

  it('logs in without TLS to a relay on this machine (127.0.0.1)', async () => {
    const smtp = await receiver('127.0.0.1');
    assert.deepEqual(await send(smtp.url), { kind: 'sent' });
    assert.equal(smtp.loginCount(), 1);
  });

  it('sends without TLS to a server elsewhere when there is no login to protect', async () => {
    const smtp = await startSmtpReceiver(undefined, '127.0.0.2');
    receivers.push(smtp);
    assert.deepEqual(await send(smtp.url), { kind: 'sent' });
    assert.equal(smtp.loginCount(), 0);
  });
});
