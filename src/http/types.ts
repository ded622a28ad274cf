import type { Principal } from '../modules/oauth/access-tokens.ts';
import type { Tenant, TenantHost } from '../modules/tenants/service.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The operation's scopes: a token holding any one of them may call it. A route declaring none is granted to no token. */
    scopes?: readonly string[];
    /** Served without a token and outside the tenant's rate limit (token endpoint, JWKS, the verification link). */
    public?: boolean;
    /** Belongs to no tenant and is served on any Host (health, the API reference); only public routes may be. */
    tenantless?: boolean;
  }
  interface FastifyRequest {
    tenant: Tenant;
    tenantHost: TenantHost;
    principal: Principal | undefined;
  }
}
