import type { Principal } from '../modules/oauth/access-tokens.ts';
import type { Tenant, TenantHost } from '../modules/tenants/service.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The operation's scopes: a token holding any one of them may call it. Routes without scopes need no token. */
    scopes?: readonly string[];
    /** Served without a token and outside the rate limit (token endpoint, JWKS). */
    public?: boolean;
  }
  interface FastifyRequest {
    tenant: Tenant;
    tenantHost: TenantHost;
    principal: Principal | undefined;
  }
}
