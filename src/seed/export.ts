import type YAMLModule from 'yaml';
import { lazyModule } from '../lazy-module.ts';
import { profileMembers, type User } from '../modules/users/user.ts';
import type { Services } from '../services.ts';
import { SECRET_PLACEHOLDER, SeedError, validSeed } from './load.ts';
import type { Seed, SeedTenant, SeedUser } from './schema.ts';
import { secretMemberOf } from '../modules/captcha/config.ts';
import type { CaptchaConfig } from '../modules/captcha/schema.ts';
import type { CustomDomain } from '../modules/custom-domains/record.ts';

/** Loaded by the first YAML seed read or written. */
const yaml = lazyModule<typeof YAMLModule>('yaml');

export { SECRET_PLACEHOLDER };

const PROFILE_MEMBERS = Object.keys(profileMembers) as Array<keyof typeof profileMembers>;

/**
 * A tenant's current state as a seed: its domain (see `seedDomain`), clients (ids, names, scopes), users
 * (profile, metadata, identities), segments, event streams, CAPTCHA settings, its own email templates
 * and its custom domains. Client secrets are kept as hashes and cannot be exported. Password hashes and
 * the webhook, signing and CAPTCHA secrets (write-only in the API) only `withSecrets`; without it each
 * of those secrets is SECRET_PLACEHOLDER, which a seed is refused with until it is filled in.
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
  const exported: SeedTenant = { id: tenant.id };
  const domain = seedDomain(tenant.domain, await services.tenants.list());
  if (domain !== undefined) exported.domain = domain;
  const secret = (value: string | undefined) => (options.withSecrets ? value : SECRET_PLACEHOLDER);
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
    for (const s of page.eventStreams) {
      const { streams: all, signingSecrets } = services.eventStreams;
      const signing = await signingSecrets.current(tenant.id, s.id);
      streams.push({
        name: s.name,
        status: s.status,
        // A stream created without subscriptions has none, which a seed says by leaving them out.
        ...(s.subscriptions.length > 0 ? { subscriptions: s.subscriptions } : {}),
        destination: withSecret(s.destination, secret(await all.authorizationSecret(tenant.id, s.id))),
        ...(signing === undefined ? {} : { signing_secret: secret(signing) }),
      });
    }
    from = page.next;
  }
  if (streams.length > 0) exported.event_streams = streams as SeedTenant['event_streams'];
  const captchaSecrets = await services.captcha.secrets(tenant.id);
  exported.captcha = captchaSeed(await services.captcha.get(tenant.id), (provider) =>
    secret(captchaSecrets.get(provider)),
  );
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
  return validSeed({ tenants: [exported] }, 'seed export', { placeholders: true });
}

/**
 * The domain a seed is to declare for `domain`. A server's own host, `localhost:<port>`, is left out:
 * re-seeded, the tenant is served on the new server's own host, whatever port it listens on. Another
 * domain on that port (`acme.localhost:<port>`) gets `{port}`, so it follows the new port too. Any
 * other domain is kept as it is.
 */
export function seedDomain(domain: string, tenants: ReadonlyArray<{ domain: string }>): string | undefined {
  const own = /^localhost:(\d+)$/;
  if (own.test(domain)) return undefined;
  const ports = new Set(tenants.flatMap((t) => own.exec(t.domain)?.[1] ?? []));
  const port = /:(\d+)$/.exec(domain)?.[1];
  return port !== undefined && ports.has(port) ? domain.replace(/:\d+$/, ':{port}') : domain;
}

/** The exported seed as YAML, with a header saying what it does not hold. */
export function seedYaml(seed: Seed, options: { withSecrets: boolean }): string {
  const header = [
    `# Tenantry seed exported ${new Date().toISOString()} (tenantry seed export).`,
    '# Client secrets are stored as hashes and cannot be exported: add client_secret (32+ characters)',
    '# to the clients your tests authenticate as.',
    options.withSecrets
      ? '# Holds password hashes and the webhook, signing and CAPTCHA secrets: keep it private.'
      : "# Password hashes left out; webhook, signing and CAPTCHA secrets read '" +
        SECRET_PLACEHOLDER +
        "'\n# (a start refuses them until they are filled in; --with-secrets writes them all).",
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
 * The CAPTCHA settings as PATCH takes them: the providers the API shows, with each provider's
 * write-only secret as `secretOf` gives it (the secret, or the placeholder).
 */
function captchaSeed(config: CaptchaConfig, secretOf: (provider: string) => string | undefined): SeedTenant['captcha'] {
  const seeded: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(config)) {
    if (key === 'active_provider_id' || typeof value !== 'object' || value === null) {
      seeded[key] = value;
      continue;
    }
    const provider = { ...(value as Record<string, unknown>) };
    const member = secretMemberOf(key);
    const secret = member === undefined ? undefined : secretOf(key);
    if (secret !== undefined) provider[member!] = secret;
    seeded[key] = provider;
  }
  return seeded as SeedTenant['captcha'];
}

/** A destination as the API shows it (its secret left out), with `secret` back in its member. */
function withSecret(destination: unknown, secret: string | undefined): unknown {
  const copy = structuredClone(destination) as { configuration?: { webhook_authorization?: Record<string, unknown> } };
  const authorization = copy.configuration?.webhook_authorization;
  if (authorization && secret !== undefined) {
    if (authorization.method === 'bearer') authorization.token = secret;
    if (authorization.method === 'basic') authorization.password = secret;
    if (authorization.method === 'custom_header') authorization.header_value = secret;
  }
  return copy;
}
