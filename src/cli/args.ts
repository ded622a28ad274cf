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

export const print = (...lines: string[]): void => {
  process.stdout.write(`${lines.join('\n')}\n`);
};
