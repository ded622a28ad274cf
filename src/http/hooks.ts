import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import type { Principal } from '../modules/oauth/access-tokens.ts';
import type { Metrics, RateLimitBucket } from '../observability/metrics.ts';
import type { Tenant, TenantHost } from '../modules/tenants/service.ts';
import { clientAddress } from './client-address.ts';
import { CNAME_API_KEY_HEADER, checkCnameApiKey } from './cname-api-key.ts';
import { ApiError, badRequest, forbidden, notFound, tooManyRequests, unauthorized } from './errors.ts';
import type { RateLimiter, RateLimitState } from './rate-limit.ts';
import './types.ts';

/** What the pipeline asks of the rest of the server: the services themselves, narrowed to what it calls. */
export interface RequestPipeline {
  /** Host → tenant, from the tenants' cache; resolveCached answers only from it, at once. */
  tenants: {
    resolve(host: string | undefined): Promise<TenantHost | undefined>;
    resolveCached(host: string | undefined): { readonly found: TenantHost | undefined } | undefined;
  };
  /** Bearer token → principal (tenant, client, scopes); verifyCached answers only a cache hit, at once. */
  accessTokens: {
    verify(tenant: Tenant, token: string): Promise<Principal>;
    verifyCached(tenant: Tenant, token: string): Principal | undefined;
  };
  /** Each tenant's bucket, drawn on by requests that carry a valid token of that tenant. */
  rateLimiter: RateLimiter;
  /** Buckets per client address, drawn on by requests without a valid token. */
  anonymousRateLimiter: RateLimiter;
  /** Requests by matched route, and rate-limit refusals. */
  metrics: Pick<Metrics, 'enabled' | 'httpRequest' | 'rateLimited'>;
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
 * then the bearer token. A request with a valid token draws on its tenant's bucket; one without, and a
 * public route's (unless it declares `ownLimits`), draws on its address's bucket, so anonymous traffic
 * can never exhaust a tenant's limit. Then the scopes.
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
    const ownLimits = registered.find((route) => route.config?.ownLimits && !route.config.public);
    if (ownLimits)
      throw new Error(
        `route ${String(ownLimits.method)} ${ownLimits.url}: only public routes may limit their callers themselves`,
      );
  });

  const { metrics } = pipeline;
  // Off (no METRICS_PORT), the hook is not there at all: the request path pays nothing for metrics.
  if (metrics.enabled) {
    app.addHook('onResponse', (request, reply, done) => {
      // The template the router matched, never the URL: no id, email or odd spelling becomes a label.
      metrics.httpRequest(
        request.is404 ? undefined : request.routeOptions.url,
        request.method,
        reply.statusCode,
        reply.elapsedTime / 1000,
      );
      done();
    });
  }

  // A callback hook, not an async one: on the hot path (Host, token and bucket all answered from
  // memory) the decision is made without a promise; anything else takes the asynchronous path, the
  // same decisions in the same order.
  app.addHook('onRequest', (request, reply, done) => {
    const config = request.routeOptions.config;
    if (config.tenantless && config.public) return done();
    // The tenant is chosen by Host: a request naming two hosts could be routed to one tenant by a proxy
    // in front and served as another's here, so it is refused whatever the route.
    if (hostIsAmbiguous(request.raw)) return done(badRequest.ambiguousHost());
    let decided: boolean;
    try {
      decided = decideAtOnce(request, reply, config, pipeline);
    } catch (error) {
      return done(error as Error);
    }
    if (decided) return done();
    decide(request, reply, config, pipeline).then(() => done(), done);
  });
}

type RouteConfig = FastifyRequest['routeOptions']['config'];

/** The pipeline's decisions, in order, for any request: awaits the tenants, tokens and limiters as needed. */
async function decide(
  request: FastifyRequest,
  reply: FastifyReply,
  config: RouteConfig,
  pipeline: RequestPipeline,
): Promise<void> {
  const { metrics } = pipeline;
  const found = await pipeline.tenants.resolve(request.headers.host);
  if (!found) {
    // Hosts that name no tenant are anonymous traffic too: a flood of made-up names is limited like any.
    await limit(request, reply, pipeline.anonymousRateLimiter, anonymousKey(request), 'anonymous', metrics);
    throw notFound.tenant(request.headers.host);
  }
  if (found.cnameApiKeyHash !== undefined && !servedOverOwnTls(request, found)) {
    try {
      checkCnameApiKey(found.domain, found.cnameApiKeyHash, request.headers[CNAME_API_KEY_HEADER]);
    } catch (error) {
      // A request refused for the domain's key is anonymous traffic: it draws on its address's bucket,
      // so a flood of them is answered 429 as any anonymous flood is. Drawn after the check, so that the
      // proxy holding the key spends nothing: a guesser whose bucket ran out still learns a right key
      // from a 200, but the key (512 random bits) is not there to be guessed.
      await limit(request, reply, pipeline.anonymousRateLimiter, anonymousKey(request), 'anonymous', metrics);
      throw error;
    }
  }
  request.tenantHost = found;
  request.tenant = found.tenant;
  if (config.public) {
    // Anonymous traffic: it draws on the address's bucket of the tenant's public routes, unless the
    // route limits its callers itself.
    if (!config.ownLimits)
      await limit(request, reply, pipeline.anonymousRateLimiter, publicRouteKey(request), 'anonymous', metrics);
    return;
  }

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
    principal ? 'tenant' : 'anonymous',
    metrics,
  );
  authorize(request, config, principal, refusal);
}

/**
 * decide(), for the common case only, without waiting: a Host in the tenants' cache, a public route or
 * a well-formed token in the verified-token cache, and buckets in this process. True when it decided
 * (or threw its refusal); false, having changed nothing, when decide() must run.
 */
function decideAtOnce(
  request: FastifyRequest,
  reply: FastifyReply,
  config: RouteConfig,
  pipeline: RequestPipeline,
): boolean {
  const found = pipeline.tenants.resolveCached(request.headers.host)?.found;
  if (!found || found.cnameApiKeyHash !== undefined) return false;
  if (config.public) {
    const takeAnonymous = pipeline.anonymousRateLimiter.takeNow;
    if (!config.ownLimits && !takeAnonymous) return false;
    request.tenantHost = found;
    request.tenant = found.tenant;
    if (!config.ownLimits)
      setRateLimitHeaders(reply, takeAnonymous!(publicRouteKey(request)), pipeline.metrics, 'anonymous');
    return true;
  }
  const takeNow = pipeline.rateLimiter.takeNow;
  if (!takeNow) return false;
  const token = bearerToken(request.headers.authorization);
  if (token === undefined) return false;
  const principal = pipeline.accessTokens.verifyCached(found.tenant, token);
  if (!principal) return false;
  request.tenantHost = found;
  request.tenant = found.tenant;
  setRateLimitHeaders(reply, takeNow(found.tenant.id), pipeline.metrics, 'tenant');
  authorize(request, config, principal, undefined);
  return true;
}

/** After the rate limit: no route (the 404 handler answers), the token's refusal, or the route's scopes. */
function authorize(
  request: FastifyRequest,
  config: RouteConfig,
  principal: Principal | undefined,
  refusal: ApiError | undefined,
): void {
  // No route matched: the 404 handler answers, whoever asked.
  if (request.is404) return;
  if (refusal) throw refusal;
  const scopes = config.scopes ?? [];
  // A route that declares no scopes is granted to no token: deny by default.
  if (!scopes.some((scope) => principal!.scopes.has(scope))) throw forbidden.scope(scopes);
  request.principal = principal;
}

async function limit(
  request: FastifyRequest,
  reply: FastifyReply,
  limiter: RateLimiter,
  key: string,
  bucket: RateLimitBucket,
  metrics: Pick<Metrics, 'rateLimited'>,
): Promise<void> {
  setRateLimitHeaders(reply, await limiter.take(key), metrics, bucket);
}

/** The bucket's headers on the reply (as rateLimitHeaders names them), then 429 when it was empty. */
function setRateLimitHeaders(
  reply: FastifyReply,
  state: RateLimitState,
  metrics: Pick<Metrics, 'rateLimited'>,
  bucket: RateLimitBucket,
): void {
  if (!reportRateLimit(reply, state, metrics, bucket)) throw tooManyRequests();
}

/**
 * The bucket's state in the rate-limit headers and, when it was empty, `Retry-After` and the refusal
 * counted: true when the request may go on. Routes that refuse in their own error shape (the token
 * endpoint) call it themselves.
 */
export function reportRateLimit(
  reply: FastifyReply,
  state: RateLimitState,
  metrics: Pick<Metrics, 'rateLimited'>,
  bucket: RateLimitBucket,
): boolean {
  // One header at a time: no object of headers built and walked on every request.
  reply.header('x-ratelimit-limit', String(state.limit));
  reply.header('x-ratelimit-remaining', String(state.remaining));
  reply.header('x-ratelimit-reset', String(state.reset));
  if (state.allowed) return true;
  reply.header('retry-after', String(state.retryAfter));
  metrics.rateLimited(bucket);
  return false;
}

function anonymousKey(request: FastifyRequest): string {
  return `anonymous:${clientAddress(request.ip)}`;
}

/**
 * The bucket of a tenant's public routes for a client address: of that tenant alone, and apart from the
 * address's other anonymous traffic. Requests through one proxy (a tenant's own, in front of its custom
 * domain, unless TRUST_PROXY names it) or one NAT share their address's buckets: this way a flood through
 * one tenant's proxy, or of unauthenticated calls, never refuses another tenant's JWKS, nor this one's.
 */
export function publicRouteKey(request: FastifyRequest): string {
  return `public:${request.tenant.id}:${clientAddress(request.ip)}`;
}

async function authenticate(request: FastifyRequest, pipeline: RequestPipeline): Promise<Principal> {
  const header = request.headers.authorization;
  if (header === undefined || header === '') throw unauthorized('Missing authentication');
  const token = bearerToken(header);
  if (token === undefined) throw badRequest.authorizationHeader();
  return pipeline.accessTokens.verify(request.tenant, token);
}

/** The token of an `Authorization: Bearer …` header; undefined when the header is absent or malformed. */
function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  // String operations rather than a regular expression: this runs on every request over a long token.
  const token = header.slice(0, 7).toLowerCase() === 'bearer ' ? header.slice(7).trim() : '';
  return token === '' || token.includes(' ') ? undefined : token;
}

/**
 * Whether a request names its host in two ways that may disagree, as RFC 9112 §3.2 forbids: two Host
 * header lines (Node keeps the first, a proxy may have read the last), or an absolute-form target
 * (`GET http://a/…`, which a proxy routes by, and which §3.2.2 puts before Host) naming another host
 * than the Host header, which chooses the tenant here.
 */
function hostIsAmbiguous(raw: IncomingMessage): boolean {
  const headers = raw.rawHeaders;
  let hosts = 0;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host' && ++hosts > 1) return true;
  }
  const target = raw.url ?? '';
  // Origin-form (`/…`) and asterisk-form (`*`) name no host: the common case costs one comparison.
  if (target.charCodeAt(0) === 0x2f || target === '*') return false;
  try {
    const url = new URL(target);
    return url.host !== new URL(`${url.protocol}//${raw.headers.host ?? ''}`).host;
  } catch {
    return true;
  }
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
