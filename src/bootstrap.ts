import fs from 'node:fs';
import path from 'node:path';
import { ALL_SCOPES } from './modules/oauth/scopes.ts';
import { DEFAULT_CONNECTION, OWN_PROVIDER } from './modules/users/user.ts';
import type { Services } from './services.ts';
import { TenantTaken, type Tenant } from './modules/tenants/service.ts';

export const DEFAULT_TENANT_ID = 'default';
export const ADMIN_CLIENT_NAME = 'Tenantry admin';

export interface BootstrapResult {
  tenant: Tenant;
  /** Set only on the start that created the admin client: the one time its secret is known. */
  admin?: { clientId: string; clientSecret: string; credentialsFile?: string };
}

/** Everything a new tenant needs to work: a signing key and its database connection. TenantTaken when the id or domain is. */
export async function provisionTenant(
  services: Pick<Services, 'tenants' | 'signingKeys' | 'connections'>,
  id: string,
  domain: string,
): Promise<Tenant> {
  const tenant = await services.tenants.create(id, domain);
  await services.signingKeys.create(tenant.id);
  await services.connections.ensure(tenant.id, DEFAULT_CONNECTION, OWN_PROVIDER);
  return tenant;
}

/**
 * First start: the default tenant on TENANT_DOMAIN and its admin client with every scope. A generated
 * secret is written, readable by the owner only, to DATA_DIR so it is not lost once printed.
 */
export async function bootstrap(
  services: Services,
  domain: string = services.config.tenantDomain,
): Promise<BootstrapResult> {
  const { config } = services;
  const existing = await services.tenants.get(DEFAULT_TENANT_ID);
  if (existing) return { tenant: existing };
  let tenant: Tenant;
  try {
    tenant = await provisionTenant(services, DEFAULT_TENANT_ID, domain);
  } catch (error) {
    // Several nodes starting at once on one database: one creates the tenant, the others use it.
    const created = error instanceof TenantTaken ? await services.tenants.get(DEFAULT_TENANT_ID) : undefined;
    if (created) return { tenant: created };
    throw error;
  }
  const admin = await services.clients.create(tenant.id, {
    name: ADMIN_CLIENT_NAME,
    scopes: ALL_SCOPES,
    clientId: config.bootstrapClientId,
    clientSecret: config.bootstrapClientSecret,
  });
  if (config.bootstrapClientSecret)
    return { tenant, admin: { clientId: admin.clientId, clientSecret: admin.clientSecret } };
  return { tenant, admin: saveAdminCredentials(services, tenant, admin) };
}

/** Writes a generated admin secret to DATA_DIR/admin-client.json (0600), so it is not lost once printed. */
export function saveAdminCredentials(
  services: Pick<Services, 'config'>,
  tenant: Tenant,
  admin: { clientId: string; clientSecret: string },
): NonNullable<BootstrapResult['admin']> {
  fs.mkdirSync(services.config.dataDir, { recursive: true });
  const credentialsFile = path.join(services.config.dataDir, 'admin-client.json');
  fs.writeFileSync(
    credentialsFile,
    `${JSON.stringify({ domain: tenant.domain, client_id: admin.clientId, client_secret: admin.clientSecret }, null, 2)}\n`,
    { mode: 0o600 },
  );
  return { clientId: admin.clientId, clientSecret: admin.clientSecret, credentialsFile };
}
