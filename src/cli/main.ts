import { ConfigError } from '../config.ts';
import { SeedError } from '../seed/load.ts';
import { terminalSafe, UsageError } from './args.ts';
import { clientsCommand } from './clients.ts';
import { customDomainsCommand } from './custom-domains.ts';
import { devCertCommand } from './dev-cert.ts';
import { eventsCommand } from './events.ts';
import { keysCommand } from './keys.ts';
import { mailboxCommand } from './mailbox.ts';
import { seedCommand, serveCommand } from './seed.ts';
import { tenantsCommand } from './tenants.ts';
import { tokenCommand } from './token.ts';
import { usersCommand } from './users-import.ts';

const usage = `Usage: tenantry <command>

Every command reads the server's configuration (DATA_DIR, DATABASE_URL, ...) and works on the same
database, also while the server runs.

Commands:
  serve [--seed FILE]                         Serve the API (the default); the seed (default: tenantry.seed.yaml,
                                              .yml or .json in the working directory) makes the first state
  seed init [--file FILE]                     Write a commented starter seed (tenantry.seed.yaml)
  seed export --tenant ID [--with-secrets] [--file FILE]
                                              A tenant's current state as a seed (password hashes,
                                              webhook, signing and CAPTCHA secrets only with
                                              --with-secrets; client secrets never)
  tenants create --id ID --domain DOMAIN      Create a tenant with its signing key and database connection
  tenants list
  clients create --tenant ID --name NAME (--scopes a,b | --all-scopes)
                                              Create a client; prints its secret once
  clients list --tenant ID
  token [--tenant ID] [--client-id ID] [--scopes a,b]
                                              Print an access token (default: the admin client of "default")
  keys rotate --tenant ID                     Make a new signing key current
  keys revoke --tenant ID --kid KID           Revoke a rotated-out signing key
  dev-cert [--dir DIR] [--hosts h1,h2]        Write a development CA and server certificate (DATA_DIR/tls)
  custom-domains certificate --tenant ID --domain NAME --cert FILE --key FILE
                                              Store the certificate chain (PEM, leaf first) and key a
                                              self-managed custom domain is served with over HTTPS
  users import --file FILE [--tenant ID] [--batch N]
                                              Import users from a JSON array or NDJSON file
  mailbox list                                Emails of the development mailbox (SMTP_URL unset), oldest first
  mailbox show ID                             One of them: its headers and HTML body
  events tail [--tenant ID] [--stream ID]     Print each webhook delivery attempt as it happens, until Ctrl-C
  help                                        Show this help
`;

/** The exit status of a command whose output's reader went away: a process ended by SIGPIPE (128 + 13). */
export const READER_GONE_STATUS = 141;

/**
 * What a command does when its output cannot be written. A reader that went away (`tenantry tenants
 * list | head -1`) ends the command quietly with SIGPIPE's status, as any command line tool; without this
 * handler Node threw the write's EPIPE as an unhandled 'error' event, with its stack. Any other failure
 * is said on stderr. The server (`serve`) logs through its own destination and is left out.
 */
function onOutputError(error: NodeJS.ErrnoException): void {
  if (error.code === 'EPIPE') process.exit(READER_GONE_STATUS);
  process.stderr.write(`tenantry: the output could not be written: ${error.message}\n`);
  process.exit(1);
}

/** The `tenantry` command line: one entry, one subcommand per task. */
export async function main(argv: string[]): Promise<void> {
  const [command = 'serve', ...args] = argv;
  if (command !== 'serve') {
    process.stdout.on('error', onOutputError);
    // What goes to stderr (errors, an import's progress) is for a reader that may be gone: its loss
    // must not end a command whose work goes on, nor change its exit status.
    process.stderr.on('error', () => undefined);
  }
  try {
    switch (command) {
      case 'serve':
        return await serveCommand(args);
      case 'seed':
        return await seedCommand(args);
      case 'tenants':
        return await tenantsCommand(args);
      case 'clients':
        return await clientsCommand(args);
      case 'token':
        return await tokenCommand(args);
      case 'keys':
        return await keysCommand(args);
      case 'dev-cert':
        return await devCertCommand(args);
      case 'custom-domains':
        return await customDomainsCommand(args);
      case 'users':
        return await usersCommand(args);
      case 'mailbox':
        return await mailboxCommand(args);
      case 'events':
        return await eventsCommand(args);
      case 'help':
      case '--help':
      case '-h':
        process.stdout.write(usage);
        return;
      default:
        throw new UsageError(`unknown command "${command}" (see: tenantry help)`);
    }
  } catch (error) {
    const known = error instanceof UsageError || error instanceof ConfigError || error instanceof SeedError;
    // Unexpected failures (a database down, a bug) keep their stack when TENANTRY_DEBUG asks for it.
    const detail = !known && process.env.TENANTRY_DEBUG ? (error as Error).stack : (error as Error).message;
    // A message may quote what it refused (a record of an import, a line of a seed): shown inert, as stdout is.
    process.stderr.write(`tenantry: ${terminalSafe(String(detail))}\n`);
    process.exitCode = known ? 2 : 1;
  }
}
