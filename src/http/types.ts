import type { Principal } from '../modules/oauth/access-tokens.ts';
import type { Tenant, TenantHost } from '../modules/tenants/service.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The operation's scopes: a token holding any one of them may call it. A route declaring none is granted to no token. */
    scopes?: readonly string[];
    /**
     * Served without a token (token endpoint, JWKS, the issuer's metadata, the verification link). Unless
     * tenantless or `ownLimits`, it draws on the caller's address's bucket, as any anonymous request.
     */
    public?: boolean;
    /**
     * A public route that limits its callers itself instead of drawing on the address's bucket: the token
     * endpoint (failed client authentications per client and address, grants on the tenant's bucket).
     */
    ownLimits?: boolean;
    /** Belongs to no tenant and is served on any Host (health, the API reference); only public routes may be. */
    tenantless?: boolean;
  }
  interface FastifyRequest {
    tenant: Tenant;
    tenantHost: TenantHost;
    principal: Principal | undefined;
  }
}
