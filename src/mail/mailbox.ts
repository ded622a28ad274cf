import fs from 'node:fs';
import path from 'node:path';
import { idPattern } from '../ids.ts';

/**
 * The development mailbox: without SMTP_URL, every email is written to DATA_DIR/mailbox as
 * `<id>.eml` (the message exactly as it would go over SMTP) and `<id>.json` (its summary and HTML).
 * Sending an email again overwrites its files, so a resend after a crash leaves one entry.
 */
export interface MailboxEntry {
  id: string;
  date: string;
  from: string;
  to: string;
  subject: string;
  html: string;
}

export const mailboxDir = (dataDir: string): string => path.join(dataDir, 'mailbox');

/** Written through a temporary file and a rename, so a reader never sees half a file. */
function writeAtomically(file: string, content: string | Buffer): void {
  const temporary = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(temporary, content, { mode: 0o600 });
  fs.renameSync(temporary, file);
}

export function writeMailboxEntry(dir: string, entry: MailboxEntry, raw: Buffer): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeAtomically(path.join(dir, `${entry.id}.eml`), raw);
  // The summary last: an entry is listed only once its message is complete.
  writeAtomically(path.join(dir, `${entry.id}.json`), `${JSON.stringify(entry, null, 2)}\n`);
}

/** Every entry, oldest first. */
export function listMailbox(dir: string): MailboxEntry[] {
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .filter((name) => name.endsWith('.json') && idPattern.email.test(name.slice(0, -5)))
    .map((name) => JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8')) as MailboxEntry)
    .sort((a, b) => a.date.localeCompare(b.date) || a.id.localeCompare(b.id));
}

/** One entry and the path of its .eml file; undefined when there is none (ids are checked, so no path escapes the directory). */
export function readMailboxEntry(dir: string, id: string): { entry: MailboxEntry; emlFile: string } | undefined {
  if (!idPattern.email.test(id)) return undefined;
  const file = path.join(dir, `${id}.json`);
  if (!fs.existsSync(file)) return undefined;
  return { entry: JSON.parse(fs.readFileSync(file, 'utf8')) as MailboxEntry, emlFile: path.join(dir, `${id}.eml`) };
}
