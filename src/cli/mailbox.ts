import { loadConfig } from '../config.ts';
import { listMailbox, mailboxDir, readMailboxEntry } from '../mail/mailbox.ts';
import { parseFlags, print, UsageError } from './args.ts';

/** The development mailbox (emails written to DATA_DIR/mailbox while SMTP_URL is unset); no database needed. */
export async function mailboxCommand([sub, ...args]: string[]): Promise<void> {
  const dir = mailboxDir(loadConfig().dataDir);
  switch (sub) {
    case 'list': {
      parseFlags('mailbox list', args, []);
      for (const entry of listMailbox(dir)) print(`${entry.id}\t${entry.date}\t${entry.to}\t${entry.subject}`);
      return;
    }
    case 'show': {
      const [id, ...rest] = args;
      if (id === undefined || rest.length > 0)
        throw new UsageError('mailbox show: expected one email id (see: tenantry mailbox list)');
      const found = readMailboxEntry(dir, id);
      if (!found) throw new UsageError(`mailbox show: no email "${id}" in ${dir}`);
      const { entry, emlFile } = found;
      print(
        `Id: ${entry.id}`,
        `Date: ${entry.date}`,
        `From: ${entry.from}`,
        `To: ${entry.to}`,
        `Subject: ${entry.subject}`,
        `File: ${emlFile}`,
        '',
        entry.html,
      );
      return;
    }
    default:
      throw new UsageError(`mailbox: expected "list" or "show", got ${sub === undefined ? 'nothing' : `"${sub}"`}`);
  }
}
