import type nodemailer from 'nodemailer';
import { lazyModule } from '../lazy-module.ts';

const mailer = lazyModule<typeof nodemailer>('nodemailer');
import { writeMailboxEntry } from './mailbox.ts';

/** One email as the worker hands it to a transport. */
export interface OutgoingEmail {
  id: string;
  from: string;
  to: string;
  subject: string;
  html: string;
}

/**
 * `error` is what the tenant sees (the email's `last_error`); `cause`, when there is one, is the mail
 * server's own account of a failure that is the operator's alone (its address, its login, its TLS): for
 * the server log, never for tenants.
 */
export type MailOutcome =
  | { kind: 'sent' }
  /** 5xx: the mail server refused the message for good; retrying would not help. */
  | { kind: 'rejected'; error: string; cause?: string }
  /** 4xx, timeouts, network and login errors: worth retrying. */
  | { kind: 'retryable'; error: string; cause?: string };

/** What a tenant is told of a failure that was not about its email (see MailOutcome). */
export const MAIL_SERVER_FAILED =
  'The mail server could not be reached, or refused the connection, its TLS upgrade or the login.';

/**
 * nodemailer's `command` of the failures that are about the email itself (its sender, recipients or
 * content): the mail server's reply to those is the tenant's to read. The rest (CONN, EHLO, STARTTLS,
 * AUTH …) would tell every tenant the operator's mail host, port and login state.
 */
const ABOUT_THE_EMAIL = /^(MAIL FROM|RCPT TO|DATA)$/;

export interface MailTransport {
  /** Where emails go, for the startup line: never with a password. */
  readonly description: string;
  send(email: OutgoingEmail): Promise<MailOutcome>;
  close(): void;
}

const truncate = (message: string) => (message.length > 300 ? `${message.slice(0, 300)} ...` : message);

/** Message-ID from the outbox id: a resend after a crash carries the same one, so receivers can tell. */
const messageOf = (email: OutgoingEmail) => ({
  messageId: `<${email.id}@tenantry>`,
  from: email.from,
  to: email.to,
  subject: email.subject,
  html: email.html,
});

/** `smtp://user:***@host:port`: the password never reaches a log or a terminal. */
function describeSmtpUrl(smtpUrl: string): string {
  try {
    const url = new URL(smtpUrl);
    if (url.password !== '') url.password = '***';
    url.search = '';
    return url.toString();
  } catch {
    return 'SMTP (unparsable URL)';
  }
}

/**
 * Whether the login waits for TLS. Over plain `smtp://` nodemailer upgrades with STARTTLS only when the
 * server offers it, so a server that does not, or anyone on the path who strips the offer from its
 * greeting, would receive the credentials in clear. With credentials, TLS is required: the send fails
 * rather than log in without it. A relay on this machine often speaks no TLS, and nothing is on that
 * path: 127.0.0.1 and [::1] are exempt, as addresses only (nodemailer resolves a name such as localhost
 * through DNS, whose answer would then choose where the login goes), and only when no `proxy` or
 * `service` option sends the connection elsewhere. `?requireTLS=false` in SMTP_URL turns it off for a
 * relay elsewhere (the URL's options override these).
 */
function loginNeedsTls(smtpUrl: string): boolean {
  let url: URL;
  try {
    url = new URL(smtpUrl);
  } catch {
    return false;
  }
  if (url.protocol !== 'smtp:' || (url.username === '' && url.password === '')) return false;
  const thisMachine = url.hostname === '127.0.0.1' || url.hostname === '[::1]';
  return !(thisMachine && !url.searchParams.has('proxy') && !url.searchParams.has('service'));
}

export function smtpTransport(smtpUrl: string, settings: { timeoutMs: number; concurrency: number }): MailTransport {
  // Pooled: consecutive emails reuse a connection instead of a TCP and TLS handshake each.
  const transport = mailer().createTransport({
    url: smtpUrl,
    requireTLS: loginNeedsTls(smtpUrl),
    pool: true,
    maxConnections: settings.concurrency,
    connectionTimeout: settings.timeoutMs,
    greetingTimeout: settings.timeoutMs,
    socketTimeout: settings.timeoutMs,
    logger: false,
    debug: false,
  });
  return {
    description: `SMTP ${describeSmtpUrl(smtpUrl)}`,
    async send(email) {
      try {
        await transport.sendMail(messageOf(email));
        return { kind: 'sent' };
      } catch (cause) {
        const error = cause as Error & { responseCode?: number; code?: string; command?: string };
        const message = truncate(error.message ?? String(cause));
        // Only a refusal of the email itself is final, and the tenant's to read: the mail server's reply
        // to its sender, recipients or content, or nodemailer's own refusal of its envelope or message.
        // Anything else (the connection, the greeting, TLS, the login) is the server's configuration or
        // the path's: it may work once that is fixed, so it is retried.
        const aboutTheEmail =
          (typeof error.command === 'string' && ABOUT_THE_EMAIL.test(error.command)) ||
          error.code === 'EENVELOPE' ||
          error.code === 'EMESSAGE';
        if (!aboutTheEmail) return { kind: 'retryable', error: MAIL_SERVER_FAILED, cause: message };
        const permanent = error.responseCode === undefined || error.responseCode >= 500;
        return { kind: permanent ? 'rejected' : 'retryable', error: message };
      }
    },
    close: () => transport.close(),
  };
}

export function mailboxTransport(dir: string): MailTransport {
  // Built by the first email: a server that sends none never loads nodemailer.
  let composer: ReturnType<typeof nodemailer.createTransport> | undefined;
  return {
    description: `the development mailbox ${dir} (tenantry mailbox list)`,
    async send(email) {
      try {
        composer ??= mailer().createTransport({ streamTransport: true, buffer: true, newline: 'unix' });
        const info = await composer.sendMail(messageOf(email));
        const raw = info.message as Buffer;
        writeMailboxEntry(
          dir,
          {
            id: email.id,
            date: new Date().toISOString(),
            from: email.from,
            to: email.to,
            subject: email.subject,
            html: email.html,
          },
          raw,
        );
        return { kind: 'sent' };
      } catch (cause) {
        return { kind: 'retryable', error: truncate(String((cause as Error).message ?? cause)) };
      }
    },
    close: () => composer?.close(),
  };
}
