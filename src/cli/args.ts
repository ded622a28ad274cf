import { parseArgs } from 'node:util';
import { loadConfig } from '../config.ts';
import { createServices, type Services } from '../services.ts';

/** A mistake of the person at the keyboard: printed as one line, without a stack trace. */
export class UsageError extends Error {}

export interface Flags {
  string(name: string): string | undefined;
  required(name: string): string;
  boolean(name: string): boolean;
  list(name: string): string[] | undefined;
  integer(name: string, fallback: number): number;
}

/** `--name value` flags of one command; unknown flags and stray arguments are refused. */
export function parseFlags(
  command: string,
  args: string[],
  strings: readonly string[],
  booleans: readonly string[] = [],
): Flags {
  const options = Object.fromEntries([
    ...strings.map((name) => [name, { type: 'string' as const }]),
    ...booleans.map((name) => [name, { type: 'boolean' as const }]),
  ]);
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({ args, options, strict: true, allowPositionals: false }).values as Record<
      string,
      string | boolean | undefined
    >;
  } catch (error) {
    throw new UsageError(`${command}: ${(error as Error).message}`);
  }
  const string = (name: string) => values[name] as string | undefined;
  return {
    string,
    required(name) {
      const value = string(name);
      if (value === undefined || value === '') throw new UsageError(`${command}: --${name} is required`);
      return value;
    },
    boolean: (name) => values[name] === true,
    list(name) {
      const value = string(name);
      return value === undefined
        ? undefined
        : value
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean);
    },
    integer(name, fallback) {
      const value = string(name);
      if (value === undefined) return fallback;
      const number = Number(value);
      if (!Number.isInteger(number) || number < 1)
        throw new UsageError(`${command}: --${name} must be a positive integer, got "${value}"`);
      return number;
    },
  };
}

/** The server's own configuration and database, so a command works alongside a running server. */
export async function withServices<T>(run: (services: Services) => Promise<T>): Promise<T> {
  // A command does its task and exits: the server's background work is left to the server.
  const services = await createServices(loadConfig(), { background: false });
  try {
    return await run(services);
  } finally {
    await services.close();
  }
}

/**
 * Lines to stdout, made safe for a terminal. What commands print comes partly from tenants (a user's
 * name in an email, a client's name, a webhook receiver's error): printed as it is, an escape sequence
 * in it could retitle the window, clear the screen and fake output, or write the clipboard. Control
 * characters other than line breaks and tabs, and the bidirectional overrides, are shown escaped
 * (`\x1b`, `\u202e`), whether or not stdout is a terminal: a file of such output is read in one later.
 * Values inside a line go through inline() (or printRow) first, so that they cannot add lines or columns.
 */
export const print = (...lines: string[]): void => {
  process.stdout.write(`${terminalSafe(lines.join('\n'))}\n`);
};

/** One line of tab-separated values, each shown on one line (see inline). */
export const printRow = (...values: string[]): void => print(values.map(inline).join('\t'));

const UNSAFE_IN_A_TERMINAL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
const UNSAFE_IN_A_LINE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

const escaped = (character: string): string => {
  const code = character.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16)}`;
};

/** Text for a terminal: its line breaks and tabs kept (a CRLF as one line break), other controls escaped. */
export function terminalSafe(text: string): string {
  return text.replace(/\r\n/g, '\n').replace(UNSAFE_IN_A_TERMINAL, escaped);
}

/** A value inside a line: every control character escaped, line breaks and tabs too. */
export function inline(value: string): string {
  return value.replace(UNSAFE_IN_A_LINE, escaped);
}
