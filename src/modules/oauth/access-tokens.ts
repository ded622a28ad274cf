import { sign as signAsync, verify as verifySignature } from 'node:crypto';
import { promisify } from 'node:util';
import { BoundedCache, stringBytes } from '../../bounded-cache.ts';
import { tokenRefused } from '../../http/errors.ts';
import type { SigningKeyService, VerificationKeys } from '../signing-keys/service.ts';
import type { Tenant, TenantService } from '../tenants/service.ts';
import { checkClaims, issuerOf, type AccessTokenClaims } from './claims.ts';

export { domainOfAudience, domainOfIssuer, issuerOf, managementAudienceOf, type AccessTokenClaims } from './claims.ts';

// With a callback, crypto.sign runs on libuv's thread pool, so RSA signing uses every core.
const sign = promisify(signAsync) as (
  algorithm: string,
  data: Buffer,
  key: import('node:crypto').KeyObject,
) => Promise<Buffer>;

/** Who is calling, as a verified token says. */
export interface Principal {
  tenantId: string;
  clientId: string;
  scopes: ReadonlySet<string>;
}

/**
 * The `scope` claim as JSON text, once per scope list: a client's list is one shared array while its
 * stored text is unchanged (ClientService), and an admin's 4 KB of scopes joined and escaped again on
 * every grant cost it 6% of its CPU. A narrowed list is a new array, written for its grant alone.
 */
const scopeJsons = new WeakMap<readonly string[], string>();
function scopeJsonOf(scopes: readonly string[]): string {
  let json = scopeJsons.get(scopes);
  if (json === undefined) {
    json = JSON.stringify(scopes.join(' '));
    if (Object.isFrozen(scopes)) scopeJsons.set(scopes, json);
  }
  return json;
}

const encodeJson = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');

interface CachedToken {
  /** The whole token: a hit on its signature counts only when the token is this very one. */
  token: string;
  principal: Principal;
  expiresAtMs: number;
  /** What made it valid besides its signature and times, looked up again on every hit. */
  kid: string;
  issuerDomain: string;
  audienceDomain: string;
}

/**
 * Verified tokens held at most: 10,000, and 16 MiB of them (a token carrying every scope runs to 8 KB;
 * its scopes are charged again as the principal's).
 */
const CACHE_BOUNDS = { entries: 10_000, bytes: 16 * 1024 * 1024 };

/**
 * Issues and verifies the Management API's RS256 access tokens. Verification results are cached
 * per token because the signature check dominates request cost. Only successes are cached, and a hit
 * counts only while the token would still verify: before it expires, for its own tenant, while its key
 * is still published (not revoked) and while the domains of its issuer and audience still belong to the
 * tenant (a custom domain not deleted). Those are Map/Set lookups in the tenant's key and domain
 * caches, which a change drops at once on its node and which other nodes reload within seconds.
 *
 * The cache is keyed by the token's signature (its last segment, 342 characters for RS256) rather
 * than the whole token: a token carrying every scope runs to 8 KB, and hashing it anew on every
 * request cost more than the rest of the token check. A hit is then compared with the whole token, and
 * only a signature spelled canonically is ever verified, so no other spelling of it can share its entry.
 */
export class AccessTokenService {
  private readonly verified = new BoundedCache<CachedToken>(CACHE_BOUNDS);

  constructor(
    private readonly keys: Pick<SigningKeyService, 'current' | 'verificationKeys' | 'verificationKeysCached'>,
    private readonly tenants: Pick<TenantService, 'domains' | 'domainsCached'>,
    private readonly lifetimeSeconds: number,
  ) {}

  /**
   * A signed access token, and its `scope` claim as JSON text for the grant's response. The payload is
   * written as JSON.stringify would write it, member by member: the scope list of an admin client is
   * some 4 KB, and escaping it once, for the payload and the response alike, spares a grant a second
   * pass over it (docs/benchmarks.md, token-grants).
   */
  async issue(input: {
    tenant: Tenant;
    domain: string;
    clientId: string;
    audience: string;
    scopes: readonly string[];
  }): Promise<{ accessToken: string; expiresIn: number; scopeJson: string }> {
    const key = await this.keys.current(input.tenant.id);
    const iat = Math.floor(Date.now() / 1000);
    const header = encodeJson({ alg: 'RS256', typ: 'JWT', kid: key.kid });
    const scopeJson = scopeJsonOf(input.scopes);
    const payloadJson =
      `{"iss":${JSON.stringify(issuerOf(input.domain))},"sub":${JSON.stringify(`${input.clientId}@clients`)}` +
      `,"aud":${JSON.stringify(input.audience)},"iat":${iat},"exp":${iat + this.lifetimeSeconds}` +
      `,"scope":${scopeJson},"gty":"client-credentials","azp":${JSON.stringify(input.clientId)}}`;
    const signingInput = `${header}.${Buffer.from(payloadJson).toString('base64url')}`;
    // Base64url and a dot: ASCII, whose latin1 bytes are its UTF-8 bytes, copied without measuring UTF-8 first.
    const signature = await sign('sha256', Buffer.from(signingInput, 'latin1'), key.privateKey);
    return {
      accessToken: `${signingInput}.${signature.toString('base64url')}`,
      expiresIn: this.lifetimeSeconds,
      scopeJson,
    };
  }

  /** Drops every verified token (after the database was restored: its clients and keys may be gone). */
  forget(): void {
    this.verified.clear();
  }

  /**
   * The principal of a token verified before, when every check of a cache hit passes on what the key
   * and domain caches hold now; undefined when verify() has to be asked (not cached, no longer valid,
   * or the caches need reading). The request pipeline takes it to stay synchronous on the hot path.
   */
  verifyCached(tenant: Tenant, token: string): Principal | undefined {
    const keys = this.keys.verificationKeysCached(tenant.id);
    const domains = keys && this.tenants.domainsCached(tenant);
    if (!domains) return undefined;
    const cached = this.verified.get(token.slice(token.lastIndexOf('.') + 1));
    return cached && this.stillValid(cached, tenant, token, keys!, domains) ? cached.principal : undefined;
  }

  private stillValid(
    cached: CachedToken,
    tenant: Tenant,
    token: string,
    keys: VerificationKeys,
    domains: ReadonlySet<string>,
  ): boolean {
    return (
      cached.token === token &&
      cached.principal.tenantId === tenant.id &&
      cached.expiresAtMs > Date.now() &&
      keys.byKid.has(cached.kid) &&
      domains.has(cached.issuerDomain) &&
      domains.has(cached.audienceDomain)
    );
  }

  async verify(tenant: Tenant, token: string): Promise<Principal> {
    const keys = await this.keys.verificationKeys(tenant.id);
    const domains = await this.tenants.domains(tenant);
    const signature = token.slice(token.lastIndexOf('.') + 1);
    const cached = this.verified.get(signature);
    if (cached && cached.token === token) {
      if (this.stillValid(cached, tenant, token, keys, domains)) return cached.principal;
      this.verified.delete(signature);
    }

    const parts = token.split('.');
    if (parts.length !== 3) throw tokenRefused.invalid();
    const [encodedHeader, encodedPayload, encodedSignature] = parts as [string, string, string];
    const header = parseSegment(encodedHeader);
    // Only RS256: `none`, HS256 (a classic key-confusion attack) and everything else are refused.
    if (header.alg !== 'RS256') throw tokenRefused.invalid();
    const kid = typeof header.kid === 'string' ? header.kid : '';
    const key = keys.byKid.get(kid);
    if (!key) throw tokenRefused.badSignature();
    // Buffer (like jose's atob) decodes loosely: padding, `+` and `/`, set unused low bits, even stray
    // characters. Re-encoding (only here, after a cache miss) admits the one canonical spelling.
    const signatureBytes = Buffer.from(encodedSignature, 'base64url');
    if (signatureBytes.toString('base64url') !== encodedSignature) throw tokenRefused.badSignature();
    const signingInput = Buffer.from(`${encodedHeader}.${encodedPayload}`);
    if (!verifySignature('sha256', signingInput, key, signatureBytes)) throw tokenRefused.badSignature();

    const claims = parseSegment(encodedPayload) as Partial<AccessTokenClaims>;
    const checked = checkClaims(claims, Math.floor(Date.now() / 1000), domains);
    const principal: Principal = { tenantId: tenant.id, clientId: checked.clientId, scopes: checked.scopes };
    const { expiresAtMs, issuerDomain, audienceDomain } = checked;
    this.verified.set(
      signature,
      { token, principal, expiresAtMs, kid, issuerDomain, audienceDomain },
      // The token, and its scopes again as the principal's: never longer than the token.
      2 * stringBytes(token),
    );
    return principal;
  }
}

function parseSegment(segment: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
    if (value && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // fall through: any undecodable segment is an invalid token
  }
  throw tokenRefused.invalid();
}
