import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../config.ts';
import { serve } from '../serve.ts';
import { applySeed } from '../seed/apply.ts';
import { findSeedFile, readSeedFile } from '../seed/load.ts';
import { exportSeed, seedYaml } from '../seed/export.ts';
import { writeFileReplacing } from '../write-file.ts';
import { parseFlags, print, terminalSafe, UsageError, withServices } from './args.ts';

/** `tenantry serve [--seed FILE]`: a seed named, or tenantry.seed.yaml/.yml/.json found in the working directory. */
export async function serveCommand(args: string[]): Promise<void> {
  const flags = parseFlags('serve', args, ['seed']);
  const file = flags.string('seed') ?? findSeedFile(process.cwd());
  // Read and checked before the server starts: a bad seed is a usage error naming its member.
  const seed = file === undefined ? undefined : readSeedFile(path.resolve(file));
  const config = loadConfig();
  if (!seed) return serve(config);
  return serve(config, { provision: (services, domain) => applySeed(services, seed, domain) });
}

export const STARTER_SEED = `# Tenantry seed: the state a server starts with (tenantry serve, createTenantry({ seed })).
# Applied once, to tenants the database does not hold yet; reset() returns to it.
# Reference: the README's "Seed files" section.
tenants:
  # The first tenant's admin client is what createTenantry() returns (clientId, clientSecret).
  - id: default
    # No domain: served on the server's own host (localhost:<port>). Others: e.g. "acme.localhost:{port}".
    admin:
      client_id: test-admin
      client_secret: test-admin-secret-change-me-0123456789
    clients:
      - name: Reader
        client_id: reader
        client_secret: reader-secret-change-me-0123456789abcdef
        scopes: [read:users]
    users:
      - email: jane@example.com
        password: correct horse battery staple
        email_verified: true
        user_metadata: { plan: pro }
        app_metadata: { roles: [admin] }
      # An imported user: a fixed id and another provider's identity (or a password_hash).
      # - user_id: google-oauth2|1234
      #   email: john@example.com
      #   identities: [{ provider: google-oauth2, user_id: "1234", connection: google-oauth2, isSocial: true }]
    # segments:
    #   - name: Europe
    #     rules: [{ match: { country: [FR, DE] } }]
    # captcha:
    #   active_provider_id: simple_captcha
    # event_streams:
    #   - name: users
    #     subscriptions: [{ event_type: user.created }]
    #     destination:
    #       type: webhook
    #       configuration:
    #         webhook_endpoint: https://hooks.example.com/tenantry
    #         webhook_authorization: { method: bearer, token: webhook-token }
    #     # Optional: the Standard Webhooks secret signing its deliveries (whsec_ and a 24-64 byte base64 key).
    #     signing_secret: whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=
    # email_templates:
    #   - template: verify_email
    #     enabled: true
    #     subject: Verify your email
    #     body: "<a href='{{ url }}'>Verify</a>"
`;

/**
 * `tenantry seed init [--file F]`: a commented starter seed; never overwrites a file.
 * `tenantry seed export --tenant ID [--with-secrets] [--file F]`: a tenant's current state as a seed.
 */
export async function seedCommand([sub, ...args]: string[]): Promise<void> {
  switch (sub) {
    case 'init': {
      const flags = parseFlags('seed init', args, ['file']);
      const file = path.resolve(flags.string('file') ?? 'tenantry.seed.yaml');
      if (fs.existsSync(file)) throw new UsageError(`seed init: ${file} exists already`);
      fs.writeFileSync(file, STARTER_SEED);
      print(`Wrote ${file}`);
      return;
    }
    case 'export': {
      const flags = parseFlags('seed export', args, ['tenant', 'file'], ['with-secrets']);
      const tenantId = flags.required('tenant');
      const withSecrets = flags.boolean('with-secrets');
      const text = await withServices(async (services) =>
        seedYaml(await exportSeed(services, tenantId, { withSecrets }), { withSecrets }),
      );
      const file = flags.string('file');
      if (file !== undefined) writeExport(path.resolve(file), text, withSecrets);
      // On a terminal, shown inert (see print); to a file or a pipe, the seed as it is, to be read back.
      else process.stdout.write(process.stdout.isTTY ? terminalSafe(text) : text);
      return;
    }
    default:
      throw new UsageError('seed: expected "init" or "export" (see: tenantry help)');
  }
}

/**
 * Writes an export to `file`. Without secrets, as any file is written: the umask applies, and a link, a
 * pipe (`--file >(…)`) or /dev/stdout is written through. With them (password hashes, webhook and
 * CAPTCHA secrets), a regular file, or none, becomes a new file of mode 0600 renamed over the path (over
 * a link's target, when the path is a link), so that no file of a looser mode found there ever holds them
 * (see writeFileReplacing); a pipe or a device keeps nothing, and is written through.
 */
function writeExport(file: string, text: string, withSecrets: boolean): void {
  if (!withSecrets) return fs.writeFileSync(file, text, { mode: 0o644 });
  let found: fs.Stats | undefined;
  try {
    found = fs.statSync(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  if (found && !found.isFile()) return fs.writeFileSync(file, text);
  writeFileReplacing(found ? fs.realpathSync(file) : file, text, 0o600);
}
