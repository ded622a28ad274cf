import { loadConfig } from '../config.ts';
import { listMailbox, mailboxDir, readMailboxEntry } from '../mail/mailbox.ts';
import { inline, parseFlags, print, printRow, UsageError } from './args.ts';

/** The development mailbox (emails written to DATA_DIR/mailbox while SMTP_URL is unset); no database needed. */
export async function mailboxCommand([sub, ...args]: string[]): Promise<void> {
  const dir = mailboxDir(loadConfig().dataDir);
  switch (sub) {
    case 'list': {
      parseFlags('mailbox list', args, []);
      for (const entry of listMailbox(dir)) printRow(entry.id, entry.date, entry.to, entry.subject);
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
        `Id: ${inline(entry.id)}`,
        `Date: ${inline(entry.date)}`,
        `From: ${inline(entry.from)}`,
        `To: ${inline(entry.to)}`,
        `Subject: ${inline(entry.subject)}`,
        `File: ${inline(emlFile)}`,
        '',
        entry.html,
      );
      return;
    }
    default:
      throw new UsageError(`mailbox: expected "list" or "show", got ${sub === undefined ? 'nothing' : `"${sub}"`}`);
  }
}
