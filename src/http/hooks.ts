import type { TLSSocket } from 'node:tls';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Principal } from '../modules/oauth/access-tokens.ts';
import type { Tenant, TenantHost } from '../modules/tenants/service.ts';
import { CNAME_API_KEY_HEADER, checkCnameApiKey } from './cname-api-key.ts';
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
 * The path every request takes before its handler: Host → tenant (for a self-managed custom domain,
 * only through the proxy holding its cname-api-key), the tenant's rate limit on the Management API (so
 * even refused tokens count and every response carries X-RateLimit-*), then the bearer token and the
 * operation's scopes.
 */
export function registerRequestPipeline(app: FastifyInstance, pipeline: RequestPipeline): void {
  app.decorateRequest('tenant', null as unknown as Tenant);
  app.decorateRequest('tenantHost', null as unknown as TenantHost);
  app.decorateRequest('principal', undefined);

  app.addHook('onRequest', async (request, reply) => {
    if (TENANTLESS.test(request.url)) return;
    const found = await pipeline.resolveTenant(request.headers.host);
    if (!found) throw new ApiError(404, `No tenant is served on host ${request.headers.host ?? '(none)'}`, 'inexistent_tenant');
    if (found.cnameApiKeyHash !== undefined && !servedOverOwnTls(request, found)) {
      checkCnameApiKey(found.domain, found.cnameApiKeyHash, request.headers[CNAME_API_KEY_HEADER]);
    }
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

/**
 * A self-managed domain whose uploaded certificate this server serves needs no proxy: a request that
 * reached this server's own TLS under that very name (SNI) is accepted without the cname-api-key.
 * Plain HTTP, or TLS under another name, still needs the key.
 */
function servedOverOwnTls(request: FastifyRequest, found: TenantHost): boolean {
  if (!found.uploadedCertificate) return false;
  const socket = request.raw.socket as TLSSocket;
  return socket.encrypted === true && typeof socket.servername === 'string' && socket.servername.toLowerCase() === found.domain;
}
