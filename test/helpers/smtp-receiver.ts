import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';

/**
 * A real SMTP server for tests, on 127.0.0.1 and a random port (plain text: no STARTTLS on loopback).
 * It parses every accepted message with mailparser, can require a login, and can refuse the next
 * messages with a chosen reply code to exercise retries.
 */
export interface SmtpReceiver {
  /** `smtp://[user:pass@]<host>:<port>`, for SMTP_URL. */
  url: string;
  /** Messages refused so far (whatever the code). */
  refusedCount(): number;
  /** Logins tried so far, right or wrong. */
  loginCount(): number;
  /** Refuses the next `count` messages at DATA with `code` (4xx: try later; 5xx: never). */
  refuseNext(count: number, code: number, message: string): void;
  /** The first accepted message to `to` not returned before, waiting for it to arrive. */
  next(to: string, timeoutMs?: number): Promise<ParsedMail>;
  close(): Promise<void>;
}

export async function startSmtpReceiver(
  credentials?: { user: string; pass: string },
  /** Another loopback address to listen on (127.0.0.2: not the address the server exempts from TLS). */
  host = '127.0.0.1',
): Promise<SmtpReceiver> {
  const messages: ParsedMail[] = [];
  const taken = new Set<ParsedMail>();
  const waiters = new Set<() => void>();
  let refusals: { count: number; code: number; message: string } = { count: 0, code: 0, message: '' };
  let refused = 0;
  let logins = 0;

  const server = new SMTPServer({
    disabledCommands: ['STARTTLS'],
    allowInsecureAuth: true,
    authOptional: credentials === undefined,
    logger: false,
    onAuth(auth, _session, callback) {
      logins += 1;
      if (credentials && auth.username === credentials.user && auth.password === credentials.pass)
        return callback(null, { user: auth.username });
      return callback(new Error('Invalid username or password'));
    },
    onData(stream, _session, callback) {
      if (refusals.count > 0) {
        refusals.count -= 1;
        refused += 1;
        const { code, message } = refusals;
        stream.resume();
        stream.on('end', () => callback(Object.assign(new Error(message), { responseCode: code })));
        return;
      }
      simpleParser(stream)
        .then((mail) => {
          messages.push(mail);
          for (const wake of [...waiters]) wake();
          callback();
        })
        .catch((error: Error) => callback(error));
    },
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.server.address() as { port: number };
  const auth = credentials ? `${encodeURIComponent(credentials.user)}:${encodeURIComponent(credentials.pass)}@` : '';

  const recipients = (mail: ParsedMail) =>
    (Array.isArray(mail.to) ? mail.to : mail.to ? [mail.to] : []).flatMap((to) =>
      to.value.map((v) => v.address?.toLowerCase()),
    );

  return {
    url: `smtp://${auth}${host}:${port}`,
    refusedCount: () => refused,
    loginCount: () => logins,
    refuseNext(count, code, message) {
      refusals = { count, code, message };
    },
    next(to, timeoutMs = 30_000) {
      const find = () => messages.find((m) => !taken.has(m) && recipients(m).includes(to.toLowerCase()));
      return new Promise<ParsedMail>((resolve, reject) => {
        const check = () => {
          const found = find();
          if (!found) return;
          taken.add(found);
          waiters.delete(check);
          clearTimeout(timer);
          resolve(found);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no email to ${to} arrived within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
