import { ADMIN_CLIENT_NAME, provisionTenant, saveAdminCredentials, type BootstrapResult } from '../bootstrap.ts';
import type { Tenant } from '../modules/tenants/service.ts';
import { ALL_SCOPES } from '../modules/oauth/scopes.ts';
import type { ImportedUser } from '../modules/users/imported-user.ts';
import { hashPassword } from '../modules/users/password.ts';
import type { Services } from '../services.ts';
import { SeedError } from './load.ts';
import type { Seed, SeedTenant, SeedUser } from './schema.ts';

/**
 * Creates the seed's tenants and what they hold through the services' own methods, as the API would.
 * A tenant that exists already (a database started before) is left as it is: a seed is a first state.
 * The first tenant gets the admin client (every scope), returned as bootstrap() returns it. A failure
 * names the member that caused it.
 */
export async function applySeed(services: Services, seed: Seed, hostDomain: string): Promise<BootstrapResult> {
  let first: BootstrapResult | undefined;
  for (const [index, declared] of seed.tenants.entries()) {
    const where = `tenants[${index}]`;
    const existing = await services.tenants.get(declared.id);
    if (existing) {
      first ??= { tenant: existing };
      continue;
    }
    const tenant = await member(`${where}.id`, () =>
      provisionTenant(services, declared.id, domainOf(declared, hostDomain)),
    );
    const admin = index === 0 ? await createAdmin(services, tenant, declared) : undefined;
    first ??= { tenant, admin };
    await fill(services, tenant, declared, where);
  }
  return first!;
}

/** The tenant's domain, `{port}` replaced by the server's port; the server's own host when it declares none. */
export function domainOf(declared: Pick<SeedTenant, 'domain'>, hostDomain: string): string {
  const port = /:(\d+)$/.exec(hostDomain)?.[1] ?? '443';
  return declared.domain?.replace('{port}', port) ?? hostDomain;
}

async function createAdmin(services: Services, tenant: Tenant, declared: SeedTenant) {
  const { config } = services;
  const clientSecret = declared.admin?.client_secret ?? config.bootstrapClientSecret;
  const admin = await services.clients.create(tenant.id, {
    name: ADMIN_CLIENT_NAME,
    scopes: ALL_SCOPES,
    clientId: declared.admin?.client_id ?? config.bootstrapClientId,
    clientSecret,
  });
  // A secret generated here is written where `tenantry serve` keeps it; a given one is known already.
  return clientSecret === undefined
    ? saveAdminCredentials(services, tenant, admin)
    : { clientId: admin.clientId, clientSecret: admin.clientSecret };
}

async function fill(services: Services, tenant: Tenant, declared: SeedTenant, where: string): Promise<void> {
  for (const [i, client] of (declared.clients ?? []).entries()) {
    await member(`${where}.clients[${i}]`, () =>
      services.clients.create(tenant.id, {
        name: client.name,
        scopes: client.scopes === 'all' ? ALL_SCOPES : client.scopes,
        clientId: client.client_id,
        clientSecret: client.client_secret,
      }),
    );
  }
  if (declared.users?.length) {
    const users = await Promise.all(declared.users.map(importedUser));
    await member(`${where}.users`, () => services.users.insertMany(tenant.id, users));
  }
  for (const [i, segment] of (declared.segments ?? []).entries())
    await member(`${where}.segments[${i}]`, () => services.segments.create(tenant.id, segment));
  if (declared.captcha) {
    const captcha = declared.captcha;
    await member(`${where}.captcha`, () => services.captcha.update(tenant.id, captcha));
  }
  for (const [i, { signing_secret: signingSecret, ...stream }] of (declared.event_streams ?? []).entries()) {
    await member(`${where}.event_streams[${i}]`, async () => {
      const created = await services.eventStreams.streams.create(tenant.id, stream);
      if (signingSecret !== undefined)
        await services.eventStreams.signingSecrets.set(tenant.id, created.id, signingSecret);
    });
  }
  for (const [i, { ready, ...body }] of (declared.custom_domains ?? []).entries()) {
    await member(`${where}.custom_domains[${i}]`, async () => {
      // A self-managed domain made ready here would need its proxy's cname-api-key, which only a verify call hands out.
      if (ready && body.type === 'self_managed_certs') throw new Error('ready is for svc_managed_certs domains only');
      const created = await services.customDomains.create(tenant.id, body);
      if (ready) await services.customDomains.verifyWithoutDns(tenant.id, created.custom_domain_id);
    });
  }
  for (const [i, template] of (declared.email_templates ?? []).entries())
    await member(`${where}.email_templates[${i}]`, () => services.emailTemplates.create(tenant.id, template));
}

/** A seeded user as the users import takes it: a plain password is hashed as POST /users would. */
async function importedUser(user: SeedUser): Promise<ImportedUser> {
  const { password, ...rest } = user;
  return password === undefined ? rest : { ...rest, password_hash: await hashPassword(password) };
}

async function member<T>(where: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw new SeedError(`seed: ${where}: ${(error as Error).message}`);
  }
}
