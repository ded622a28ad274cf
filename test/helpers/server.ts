import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { buildApp, type AppOptions } from '../../src/app.ts';
import type { ServiceOptions } from '../../src/services.ts';
import { listenMetrics } from '../../src/observability/metrics-server.ts';
import { bootstrap, provisionTenant } from '../../src/bootstrap.ts';
import { loadConfig, type Config } from '../../src/config.ts';
import { ALL_SCOPES } from '../../src/modules/oauth/scopes.ts';
import type { Tenant } from '../../src/modules/tenants/service.ts';
import { createServices, type Services } from '../../src/services.ts';
import { createTestDatabase, type TestDatabase } from './databases.ts';

export const ADMIN_ID = 'test-admin-client';
export const ADMIN_SECRET = 'test-admin-secret-with-enough-entropy-0123456789';

export interface TestServer {
  app: FastifyInstance;
  services: Services;
  database: TestDatabase;
  tenant: Tenant;
  domain: string;
  /** A token of the admin client (every scope), fetched through POST /oauth/token. */
  adminToken: string;
  /** app.inject on the default tenant's host, with the admin token unless `token` is given (null: none). */
  request(options: InjectOptions & { token?: string | null }): Promise<LightMyRequestResponse>;
  /** A client of the default tenant with exactly these scopes, and a token for it. */
  clientWithScopes(scopes: readonly string[]): Promise<{ clientId: string; clientSecret: string; token: string }>;
  /** A second tenant on its own domain, with an all-scopes client and its token. */
  addTenant(id: string, domain: string): Promise<{ tenant: Tenant; token: string }>;
  tokenFor(domain: string, clientId: string, clientSecret: string, audience?: string): Promise<string>;
  /** Where /metrics listens when METRICS_PORT was given (0: a free port), as serve.ts starts it. */
  metricsPort: number | undefined;
  close(): Promise<void>;
}

export async function startTestServer(
  kind: 'sqlite' | 'postgres',
  overrides: Record<string, string> = {},
  appOptions: AppOptions & Pick<ServiceOptions, 'logStream'> = {},
): Promise<TestServer> {
  const database = await createTestDatabase(kind);
  const domain = overrides.TENANT_DOMAIN ?? 'tenant.test';
  const config: Config = loadConfig({
    DATA_DIR: database.dataDir,
    DATABASE_URL: database.databaseUrl,
    TENANT_DOMAIN: domain,
    BOOTSTRAP_CLIENT_ID: ADMIN_ID,
    BOOTSTRAP_CLIENT_SECRET: ADMIN_SECRET,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
    ...overrides,
  });
  const { logStream, ...options } = appOptions;
  const services = await createServices(config, { logStream });
  const app = await buildApp(services, options);
  const { tenant } = await bootstrap(services);
  const metricsServer = await listenMetrics(services);

  const tokenFor = async (
    host: string,
    clientId: string,
    clientSecret: string,
    audience = `https://${host}/api/v2/`,
  ) => {
    const response = await app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { host },
      payload: { grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret, audience },
    });
    if (response.statusCode !== 200) throw new Error(`token request failed: ${response.statusCode} ${response.body}`);
    return (response.json() as { access_token: string }).access_token;
  };
  const adminToken = await tokenFor(domain, ADMIN_ID, ADMIN_SECRET);

  return {
    app,
    services,
    database,
    tenant,
    domain,
    adminToken,
    tokenFor,
    metricsPort: metricsServer?.port,
    request({ token, headers, ...options }) {
      const auth = token === null ? {} : { authorization: `Bearer ${token ?? adminToken}` };
      return app.inject({ ...options, headers: { host: domain, ...auth, ...headers } });
    },
    async clientWithScopes(scopes) {
      const client = await services.clients.create(tenant.id, { name: `scoped ${scopes.join(' ')}`, scopes });
      return {
        clientId: client.clientId,
        clientSecret: client.clientSecret,
        token: await tokenFor(domain, client.clientId, client.clientSecret),
      };
    },
    async addTenant(id, tenantDomain) {
      const other = await provisionTenant(services, id, tenantDomain);
      const client = await services.clients.create(other.id, { name: 'admin', scopes: ALL_SCOPES });
      return { tenant: other, token: await tokenFor(tenantDomain, client.clientId, client.clientSecret) };
    },
    async close() {
      await app.close();
      await metricsServer?.close();
      await services.close();
      await database.drop();
    },
  };
}
