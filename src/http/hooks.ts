import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Principal } from '../modules/oauth/access-tokens.ts';
import type { Tenant, TenantHost } from '../modules/tenants/service.ts';
import { ApiError, badRequest, forbidden, tooManyRequests, unauthorized } from './errors.ts';
import { rateLimitHeaders, type RateLimiter } from './rate-limit.ts';
import './types.ts';

/** Paths that belong to no tenant: the server's own health, the API reference and its schema. */
const TENANTLESS = /^\/(health|docs)(\/|$|\?)|^\/api\/v2\/openapi\.json(\?|$)/;
const MANAGEMENT_API = /^\/api\/v2(\/|$|\?)/;

export interface RequestPipeline {
  resolveTenant(host: string | undefined): Promise<TenantHost | undefined>;
  rateLimiter: RateLimiter;
  verifyToken(tenant: Tenant, token: string): Promise<Principal>;
}

/**
 * The path every request takes before its handler: Host → tenant, the tenant's rate limit on the
 * Management API (so even refused tokens count and every response carries X-RateLimit-*), then the
 * bearer token and the operation's scopes.
 */
export function registerRequestPipeline(app: FastifyInstance, pipeline: RequestPipeline): void {
  app.decorateRequest('tenant', null as unknown as Tenant);
  app.decorateRequest('tenantHost', null as unknown as TenantHost);
  app.decorateRequest('principal', undefined);

  app.addHook('onRequest', async (request, reply) => {
    if (TENANTLESS.test(request.url)) return;
    const found = await pipeline.resolveTenant(request.headers.host);
    if (!found) throw new ApiError(404, `No tenant is served on host ${request.headers.host ?? '(none)'}`, 'inexistent_tenant');
    request.tenantHost = found;
    request.tenant = found.tenant;

    const config = request.routeOptions.config;
    if (config.public || !MANAGEMENT_API.test(request.url)) return;
    const state = await pipeline.rateLimiter.take(found.tenant.id);
    reply.headers(rateLimitHeaders(state));
    if (!state.allowed) throw tooManyRequests();

    if (config.scopes) request.principal = await authenticate(request, pipeline, config.scopes);
  });
}

async function authenticate(request: FastifyRequest, pipeline: RequestPipeline, scopes: readonly string[]): Promise<Principal> {
  const header = request.headers.authorization;
  if (header === undefined || header === '') throw unauthorized('Missing authentication');
  // String operations rather than a regular expression: this runs on every request over a long token.
  const token = header.slice(0, 7).toLowerCase() === 'bearer ' ? header.slice(7).trim() : '';
  if (token === '' || token.includes(' ')) throw badRequest.authorizationHeader();
  const principal = await pipeline.verifyToken(request.tenant, token);
  if (!scopes.some((scope) => principal.scopes.has(scope))) throw forbidden.scope(scopes);
  return principal;
}
