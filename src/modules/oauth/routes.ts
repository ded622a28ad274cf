import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Services } from '../../services.ts';
import { domainOfAudience } from './access-tokens.ts';
import { ClientAuthenticationLimit } from './client-authentication-limit.ts';
import { discoveryDocument } from './discovery.ts';
import { publicRouteKey, reportRateLimit } from '../../http/hooks.ts';
import type { RateLimiter } from '../../http/rate-limit.ts';
import type { Metrics, RateLimitBucket, TokenOutcome } from '../../observability/metrics.ts';

/** OAuth errors keep OAuth's own shape, not the Management API's. */
function oauthError(
  reply: FastifyReply,
  status: number,
  error: string,
  description: string,
  extra: Record<string, string> = {},
) {
  return reply
    .code(status)
    .header('cache-control', 'no-store')
    .send({ error, error_description: description, ...extra });
}

/** RFC 6749 §2.3.1: Basic credentials are form-urlencoded before base64. */
function basicCredentials(header: string | undefined): { id: string; secret: string } | undefined {
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? '');
  if (!match?.[1]) return undefined;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return undefined;
  const unescape = (v: string) => {
    try {
      return decodeURIComponent(v.replace(/\+/g, ' '));
    } catch {
      return v;
    }
  };
  return { id: unescape(decoded.slice(0, colon)), secret: unescape(decoded.slice(colon + 1)) };
}

/** Generated client ids have 32 characters; chosen ones (BOOTSTRAP_CLIENT_ID) are never this long. */
const MAX_CLIENT_ID_LENGTH = 256;

/** The parameters of a client-credentials request. */
const TOKEN_PARAMETERS = ['grant_type', 'client_id', 'client_secret', 'audience', 'scope'] as const;

const field = (body: Record<string, unknown>, name: string): string | undefined =>
  typeof body[name] === 'string' && body[name] !== '' ? (body[name] as string) : undefined;

/** Spends one token of `key`'s bucket, reported on the reply: true when the request may go on. */
async function drawOn(
  limiter: RateLimiter,
  key: string,
  reply: FastifyReply,
  bucket: RateLimitBucket,
  metrics: Pick<Metrics, 'rateLimited'>,
): Promise<boolean> {
  return reportRateLimit(reply, await limiter.take(key), metrics, bucket);
}

export async function oauthRoutes(
  app: FastifyInstance,
  services: Pick<
    Services,
    | 'signingKeys'
    | 'clients'
    | 'tenants'
    | 'accessTokens'
    | 'tokenFailureLimiters'
    | 'rateLimiter'
    | 'anonymousRateLimiter'
    | 'metrics'
  >,
): Promise<void> {
  const failures = new ClientAuthenticationLimit(services.tokenFailureLimiters);
  const { metrics } = services;
  /** The refusal, counted by its reason: the client id, tenant and address never become labels. */
  const refuse = (
    outcome: Exclude<TokenOutcome, 'granted'>,
    reply: FastifyReply,
    status: number,
    error: string,
    description: string,
  ) => {
    metrics.tokenRequest(outcome);
    return oauthError(reply, status, error, description);
  };

  app.get('/.well-known/jwks.json', { config: { public: true }, schema: { hide: true } }, async (request) =>
    services.signingKeys.jwks(request.tenant.id),
  );

  // RFC 8414's address for an issuer without a path, and OpenID Connect Discovery's: libraries try one or the other.
  for (const url of ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server']) {
    app.get(url, { config: { public: true }, schema: { hide: true } }, async (request) =>
      discoveryDocument(request.tenantHost.domain),
    );
  }

  app.post(
    '/oauth/token',
    // Its own limits: failed client authentications per client and address (before the secret is
    // compared), and each grant on its tenant's bucket (once the client is known), like a request with
    // the token it asks for. The address's bucket of anonymous traffic would hold up good grants.
    { config: { public: true, ownLimits: true }, schema: { hide: true } },
    async (request: FastifyRequest, reply) => {
      /** A refusal before any client is named: drawn, as other anonymous traffic, on the address's bucket. */
      const refuseEarly = async (
        outcome: Exclude<TokenOutcome, 'granted'>,
        status: number,
        error: string,
        description: string,
      ) =>
        (await drawOn(services.anonymousRateLimiter, publicRouteKey(request), reply, 'anonymous', metrics))
          ? refuse(outcome, reply, status, error, description)
          : refuse('too_many_requests', reply, 429, 'too_many_requests', 'Global limit has been reached');
      const body = (request.body && typeof request.body === 'object' ? request.body : {}) as Record<string, unknown>;
      // RFC 6749 §3.2: a parameter sent twice (a form's `scope=a&scope=b`, a JSON array) is refused. Read
      // as absent instead, a repeated `scope` asked for no narrowing and got the client's whole grant.
      const repeated = TOKEN_PARAMETERS.find((name) => body[name] !== undefined && typeof body[name] !== 'string');
      if (repeated !== undefined)
        return refuseEarly(
          'invalid_request',
          400,
          'invalid_request',
          `Invalid parameter: ${repeated} must be given once, as a string`,
        );
      const grantType = field(body, 'grant_type');
      if (!grantType)
        return refuseEarly('invalid_request', 400, 'invalid_request', 'Missing required parameter: grant_type');
      if (grantType !== 'client_credentials')
        return refuseEarly(
          'unsupported_grant_type',
          400,
          'unsupported_grant_type',
          `Unsupported grant type: ${grantType}`,
        );
      const basic = basicCredentials(request.headers.authorization);
      const clientId = basic?.id ?? field(body, 'client_id');
      const clientSecret = basic?.secret ?? field(body, 'client_secret');
      if (!clientId)
        return refuseEarly('invalid_request', 400, 'invalid_request', 'Missing required parameter: client_id');

      // No client has such an id: refused before it could name a failures' bucket or fill a log line.
      if (clientId.length > MAX_CLIENT_ID_LENGTH)
        return refuseEarly('invalid_client', 401, 'access_denied', 'Unauthorized');

      const { tenant, domain } = request.tenantHost;
      const wait = await failures.begin(tenant.id, clientId, request.ip);
      if (wait > 0) {
        request.log.warn({ clientId, tenantId: tenant.id }, 'client authentication refused: too many failed attempts');
        reply.header('retry-after', String(wait));
        metrics.rateLimited('token_failures');
        return refuse(
          'too_many_attempts',
          reply,
          429,
          'too_many_attempts',
          'Too many failed client authentication attempts. Try again later.',
        );
      }
      const client = clientSecret ? await services.clients.authenticate(tenant.id, clientId, clientSecret) : undefined;
      if (!client) return refuse('invalid_client', reply, 401, 'access_denied', 'Unauthorized');
      await failures.succeeded(tenant.id, clientId, request.ip);

      const audience = field(body, 'audience');
      if (!audience)
        return refuse(
          'no_audience',
          reply,
          403,
          'access_denied',
          'No audience parameter was provided, and no default audience has been configured',
        );
      const domains = await services.tenants.domains(tenant);
      const audienceDomain = domainOfAudience(audience);
      if (audienceDomain === undefined || !domains.has(audienceDomain)) {
        return refuse(
          'audience_not_enabled',
          reply,
          403,
          'access_denied',
          `Service not enabled within domain: ${audience}`,
        );
      }
      if (client.scopes.length === 0) {
        return refuse(
          'client_without_scopes',
          reply,
          403,
          'access_denied',
          `Client is not authorized to access "${audience}". You might probably want to create a "client-grant" associated to this API.`,
        );
      }
      // A requested scope narrows the grant; scopes the client lacks are left out, as the original does.
      // A Set: a list looked through for each of an admin's ~450 scopes made a body of one-letter words
      // hold the event loop for 160 ms a grant.
      const requested = field(body, 'scope')?.split(' ');
      const wanted = requested && new Set(requested);
      const scopes = wanted ? client.scopes.filter((s) => wanted.has(s)) : client.scopes;

      // A grant is the tenant's own traffic: drawn on its bucket only now, once the client authenticated
      // and the grant is to be issued, so that neither a caller without the secret nor a refused request
      // (no audience, no scopes) can spend it.
      if (!(await drawOn(services.rateLimiter, tenant.id, reply, 'tenant', metrics)))
        return refuse('too_many_requests', reply, 429, 'too_many_requests', 'Global limit has been reached');
      const { accessToken, expiresIn, scopeJson } = await services.accessTokens.issue({
        tenant,
        domain,
        clientId,
        audience,
        scopes,
      });
      metrics.tokenRequest('granted');
      // Written as JSON.stringify would write it: a token is base64url and dots, nothing to escape, and
      // the scope is escaped already; serialising the 10 KB of an admin's grant again cost it 20 µs.
      return reply
        .header('cache-control', 'no-store')
        .type('application/json; charset=utf-8')
        .send(`{"access_token":"${accessToken}","scope":${scopeJson},"expires_in":${expiresIn},"token_type":"Bearer"}`);
    },
  );
}
