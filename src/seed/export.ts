import type YAMLModule from 'yaml';
import { lazyModule } from '../lazy-module.ts';
import { profileMembers, type User } from '../modules/users/user.ts';
import type { Services } from '../services.ts';
import { SeedError, validSeed } from './load.ts';
import type { Seed, SeedTenant, SeedUser } from './schema.ts';
import type { CaptchaConfig } from '../modules/captcha/schema.ts';
import type { CustomDomain } from '../modules/custom-domains/record.ts';

/** Loaded by the first YAML seed read or written. */
const yaml = lazyModule<typeof YAMLModule>('yaml');

/** Where a secret the database cannot give back stands in an export: to be filled in by hand. */
export const SECRET_PLACEHOLDER = 'REPLACE-ME: secrets are not exported';

const PROFILE_MEMBERS = Object.keys(profileMembers) as Array<keyof typeof profileMembers>;

/**
 * A tenant's current state as a seed: its domain, clients (ids, names, scopes), users (profile,
 * metadata, identities; password hashes only `withSecrets`), segments, event streams, CAPTCHA settings,
 * its own email templates and its custom domains. Client secrets are kept as hashes and cannot be
 * exported; webhook and CAPTCHA secrets, write-only in the API, are written as a placeholder.
 */
export async function exportSeed(
  services: Pick<
    Services,
    'tenants' | 'clients' | 'users' | 'segments' | 'eventStreams' | 'captcha' | 'emailTemplates' | 'customDomains'
  >,
  tenantId: string,
  options: { withSecrets: boolean },
): Promise<Seed> {
  const tenant = await services.tenants.get(tenantId);
  if (!tenant) throw new SeedError(`seed export: no tenant "${tenantId}"`);
  const exported: SeedTenant = { id: tenant.id, domain: tenant.domain };
  const clients = await services.clients.list(tenant.id);
  if (clients.length > 0)
    exported.clients = clients.map((c) => ({ name: c.name, client_id: c.clientId, scopes: [...c.scopes] }));
  const users: SeedUser[] = [];
  for await (const { user, passwordHash } of services.users.all(tenant.id))
    users.push(seedUser(user, options.withSecrets ? passwordHash : null));
  if (users.length > 0) exported.users = users;
  const segments = [];
  for (let from: string | undefined, first = true; first || from !== undefined; first = false) {
    const page = await services.segments.list(tenant.id, { from, take: 100, type: 'self' });
    segments.push(
      ...page.segments.map((s) => ({
        name: s.name,
        rules: s.rules,
        ...(s.description ? { description: s.description } : {}),
      })),
    );
    from = page.next;
  }
  if (segments.length > 0) exported.segments = segments as SeedTenant['segments'];
  const streams = [];
  for (let from: string | undefined, first = true; first || from !== undefined; first = false) {
    const page = await services.eventStreams.streams.list(tenant.id, { from, take: 100 });
    streams.push(
      ...page.eventStreams.map((s) => ({
        name: s.name,
        status: s.status,
        subscriptions: s.subscriptions,
        destination: withPlaceholders(s.destination),
      })),
    );
    from = page.next;
  }
  if (streams.length > 0) exported.event_streams = streams as SeedTenant['event_streams'];
  exported.captcha = captchaSeed(await services.captcha.get(tenant.id));
  const templates = await services.emailTemplates.own(tenant.id);
  if (templates.length > 0) exported.email_templates = templates as SeedTenant['email_templates'];
  const domains = (await services.customDomains.list(tenant.id, {})) as CustomDomain[];
  if (domains.length > 0)
    exported.custom_domains = domains.map((d) => ({
      domain: d.domain,
      type: d.type,
      ...(d.custom_client_ip_header ? { custom_client_ip_header: d.custom_client_ip_header } : {}),
      ...(d.tls_policy ? { tls_policy: d.tls_policy } : {}),
      ...(d.domain_metadata ? { domain_metadata: d.domain_metadata } : {}),
      // Only a platform-managed domain can be seeded ready; a self-managed one is verified again.
      ...(d.status === 'ready' && d.type === 'svc_managed_certs' ? { ready: true } : {}),
    })) as SeedTenant['custom_domains'];
  // What is written must be a seed that starts a server: checked as a seed file is.
  return validSeed({ tenants: [exported] }, 'seed export');
}

/** The exported seed as YAML, with a header saying what it does not hold. */
export function seedYaml(seed: Seed, options: { withSecrets: boolean }): string {
  const header = [
    `# Tenantry seed exported ${new Date().toISOString()} (tenantry seed export).`,
    '# Client secrets are stored as hashes and cannot be exported: add client_secret (32+ characters)',
    "# to the clients your tests authenticate as. Webhook secrets read '" + SECRET_PLACEHOLDER + "'.",
    options.withSecrets
      ? '# Holds password hashes: keep it private.'
      : '# Password hashes left out (--with-secrets writes them).',
  ];
  return `${header.join('\n')}\n${yaml().stringify(seed)}`;
}

function seedUser(user: User, passwordHash: string | null): SeedUser {
  const seeded: Record<string, unknown> = { user_id: user.user_id };
  for (const member of PROFILE_MEMBERS) if (user[member] !== undefined) seeded[member] = user[member];
  seeded.identities = user.identities.map(({ connection, user_id, provider, isSocial, profileData }) => ({
    connection,
    user_id,
    provider,
    isSocial,
    ...(profileData ? { profileData } : {}),
  }));
  if (passwordHash !== null) seeded.password_hash = passwordHash;
  return seeded as SeedUser;
}

/**
 * The CAPTCHA settings as PATCH takes them: the providers the API shows, each provider's write-only
 * secret as the placeholder (the API never gives it back).
 */
function captchaSeed(config: CaptchaConfig): SeedTenant['captcha'] {
  const seeded: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(config)) {
    if (key === 'active_provider_id' || typeof value !== 'object' || value === null) {
      seeded[key] = value;
      continue;
    }
    const provider = { ...(value as Record<string, unknown>) };
    if (key === 'recaptcha_enterprise') provider.api_key = SECRET_PLACEHOLDER;
    else if ('site_key' in provider) provider.secret = SECRET_PLACEHOLDER;
    seeded[key] = provider;
  }
  return seeded as SeedTenant['captcha'];
}

/** A destination as the API shows it (secrets left out), with placeholders where its secrets were. */
function withPlaceholders(destination: unknown): unknown {
  const copy = structuredClone(destination) as { configuration?: { webhook_authorization?: Record<string, unknown> } };
  const authorization = copy.configuration?.webhook_authorization;
  if (authorization) {
    if (authorization.method === 'bearer') authorization.token = SECRET_PLACEHOLDER;
    if (authorization.method === 'basic') authorization.password = SECRET_PLACEHOLDER;
    if (authorization.method === 'custom_header') authorization.header_value = SECRET_PLACEHOLDER;
  }
  return copy;
}
