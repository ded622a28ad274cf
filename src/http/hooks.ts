import type { TLSSocket } from 'node:tls';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import type { Principal } from '../modules/oauth/access-tokens.ts';
import type { Tenant, TenantHost } from '../modules/tenants/service.ts';
import { clientAddress } from './client-address.ts';
import { CNAME_API_KEY_HEADER, checkCnameApiKey } from './cname-api-key.ts';
import { ApiError, badRequest, forbidden, notFound, tooManyRequests, unauthorized } from './errors.ts';
import { rateLimitHeaders, type RateLimiter } from './rate-limit.ts';
import './types.ts';

/** What the pipeline asks of the rest of the server: the services themselves, narrowed to what it calls. */
export interface RequestPipeline {
  /** Host → tenant, from the tenants' cache. */
  tenants: { resolve(host: string | undefined): Promise<TenantHost | undefined> };
  /** Bearer token → principal (tenant, client, scopes). */
  accessTokens: { verify(tenant: Tenant, token: string): Promise<Principal> };
  /** Each tenant's bucket, drawn on by requests that carry a valid token of that tenant. */
  rateLimiter: RateLimiter;
  /** Buckets per client address, drawn on by requests without a valid token. */
  anonymousRateLimiter: RateLimiter;
}

/** A route as registered, with the declaration the pipeline enforces: what the route-table tests walk. */
export interface RouteEntry {
  method: string;
  url: string;
  scopes: readonly string[] | undefined;
  public: boolean;
  tenantless: boolean;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route of the app with its declaration, in registration order. */
    routeTable: readonly RouteEntry[];
  }
}

/**
 * The path every request takes before its handler. Every decision is made on the route that matched
 * (its declared options), never on how the URL was spelled: a route is authenticated, scoped and
 * rate-limited unless it declares itself `public`, so a route added without a declaration is closed.
 *
 * Host → tenant (for a self-managed custom domain, only through the proxy holding its cname-api-key),
 * then the bearer token. A request with a valid token draws on its tenant's bucket; one without draws
 * on its address's bucket, so anonymous traffic can never exhaust a tenant's limit. Then the scopes.
 */
export function registerRequestPipeline(app: FastifyInstance, pipeline: RequestPipeline): void {
  app.decorateRequest('tenant', null as unknown as Tenant);
  app.decorateRequest('tenantHost', null as unknown as TenantHost);
  app.decorateRequest('principal', undefined);

  // Route options as registered; read when the table is asked for, after every plugin's onRoute hooks ran.
  const registered: RouteOptions[] = [];
  app.addHook('onRoute', (route) => void registered.push(route));
  app.decorate('routeTable', {
    getter: (): RouteEntry[] =>
      registered.flatMap((route) =>
        [route.method].flat().map((method) => ({
          method,
          url: route.url,
          scopes: route.config?.scopes,
          public: route.config?.public === true,
          tenantless: route.config?.tenantless === true,
        })),
      ),
  });
  app.addHook('onReady', async () => {
    const misdeclared = registered.find((route) => route.config?.tenantless && !route.config.public);
    if (misdeclared)
      throw new Error(`route ${String(misdeclared.method)} ${misdeclared.url}: tenantless routes must be public`);
  });

  app.addHook('onRequest', async (request, reply) => {
    const config = request.routeOptions.config;
    if (config.tenantless && config.public) return;

    const found = await pipeline.tenants.resolve(request.headers.host);
    if (!found) {
      // Hosts that name no tenant are anonymous traffic too: a flood of made-up names is limited like any.
      await limit(request, reply, pipeline.anonymousRateLimiter, anonymousKey(request));
      throw notFound.tenant(request.headers.host);
    }
    if (found.cnameApiKeyHash !== undefined && !servedOverOwnTls(request, found)) {
      checkCnameApiKey(found.domain, found.cnameApiKeyHash, request.headers[CNAME_API_KEY_HEADER]);
    }
    request.tenantHost = found;
    request.tenant = found.tenant;
    if (config.public) return;

    let principal: Principal | undefined;
    let refusal: ApiError | undefined;
    try {
      principal = await authenticate(request, pipeline);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      refusal = error;
    }
    await limit(
      request,
      reply,
      principal ? pipeline.rateLimiter : pipeline.anonymousRateLimiter,
      principal ? found.tenant.id : anonymousKey(request),
    );
    // No route matched: the 404 handler answers, whoever asked.
    if (request.is404) return;
    if (refusal) throw refusal;
    const scopes = config.scopes ?? [];
    // A route that declares no scopes is granted to no token: deny by default.
    if (!scopes.some((scope) => principal!.scopes.has(scope))) throw forbidden.scope(scopes);
    request.principal = principal;
  });
}

async function limit(request: FastifyRequest, reply: FastifyReply, limiter: RateLimiter, key: string): Promise<void> {
  const state = await limiter.take(key);
  reply.headers(rateLimitHeaders(state));
  if (!state.allowed) throw tooManyRequests();
}

function anonymousKey(request: FastifyRequest): string {
  return `anonymous:${clientAddress(request.ip)}`;
}

async function authenticate(request: FastifyRequest, pipeline: RequestPipeline): Promise<Principal> {
  const header = request.headers.authorization;
  if (header === undefined || header === '') throw unauthorized('Missing authentication');
  // String operations rather than a regular expression: this runs on every request over a long token.
  const token = header.slice(0, 7).toLowerCase() === 'bearer ' ? header.slice(7).trim() : '';
  if (token === '' || token.includes(' ')) throw badRequest.authorizationHeader();
  return pipeline.accessTokens.verify(request.tenant, token);
}

/**
 * A self-managed domain whose uploaded certificate this server serves needs no proxy: a request that
 * reached this server's own TLS under that very name (SNI) is accepted without the cname-api-key.
 * Plain HTTP, or TLS under another name, still needs the key.
 */
function servedOverOwnTls(request: FastifyRequest, found: TenantHost): boolean {
  if (!found.uploadedCertificate) return false;
  const socket = request.raw.socket as TLSSocket;
  return (
    socket.encrypted === true &&
    typeof socket.servername === 'string' &&
    socket.servername.toLowerCase() === found.domain
  );
}
