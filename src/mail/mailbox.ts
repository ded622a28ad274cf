import fs from 'node:fs';
import path from 'node:path';
import { idPattern } from '../ids.ts';
import { writeFileReplacing } from '../write-file.ts';

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

export function writeMailboxEntry(dir: string, entry: MailboxEntry, raw: Buffer): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileReplacing(path.join(dir, `${entry.id}.eml`), raw, 0o600);
  // The summary last: an entry is listed only once its message is complete.
  writeFileReplacing(path.join(dir, `${entry.id}.json`), `${JSON.stringify(entry, null, 2)}\n`, 0o600);
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

/** One header of a mailbox message, its value unfolded and its encoded words (RFC 2047) decoded. */
export interface MailboxHeader {
  name: string;
  value: string;
}

/** `=?charset?B|Q?text?=`: the encoded words nodemailer writes for non-ASCII header text. */
const ENCODED_WORD = /=\?([^?\s]+)\?([BbQq])\?([^?\s]*)\?=/g;

function decodeWord(charset: string, encoding: string, text: string): string {
  const bytes =
    encoding.toUpperCase() === 'B'
      ? Buffer.from(text, 'base64')
      : Buffer.from(
          text
            .replace(/_/g, ' ')
            .replace(/=([0-9A-Fa-f]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))),
          'latin1',
        );
  try {
    return new TextDecoder(charset.toLowerCase()).decode(bytes);
  } catch {
    return bytes.toString('latin1');
  }
}

/** A header value with its encoded words decoded; the whitespace between two adjacent encoded words is dropped. */
export function decodeHeaderValue(value: string): string {
  return value
    .replace(/(\?=)\s+(?==\?)/g, '$1')
    .replace(ENCODED_WORD, (_, charset: string, encoding: string, text: string) => decodeWord(charset, encoding, text));
}

/** The headers of a message (what precedes its first empty line), in order, unfolded and decoded. */
export function parseHeaders(raw: string): MailboxHeader[] {
  const end = raw.search(/\r?\n\r?\n/);
  const lines = (end === -1 ? raw : raw.slice(0, end)).split(/\r?\n/);
  const headers: MailboxHeader[] = [];
  for (const line of lines) {
    const last = headers[headers.length - 1];
    if (/^[ \t]/.test(line) && last) last.value += line.replace(/^[ \t]+/, ' ');
    else {
      const colon = line.indexOf(':');
      if (colon > 0) headers.push({ name: line.slice(0, colon).trim(), value: line.slice(colon + 1).trim() });
    }
  }
  return headers.map(({ name, value }) => ({ name, value: decodeHeaderValue(value) }));
}

/**
 * A message of the development mailbox, whole: its summary, its headers as written in its .eml and its
 * HTML body; undefined when there is none (ids are checked, so no path escapes the directory).
 */
export function readMailboxMessage(
  dir: string,
  id: string,
): { entry: MailboxEntry; headers: MailboxHeader[] } | undefined {
  const found = readMailboxEntry(dir, id);
  if (!found || !fs.existsSync(found.emlFile)) return undefined;
  return { entry: found.entry, headers: parseHeaders(fs.readFileSync(found.emlFile, 'utf8')) };
}
