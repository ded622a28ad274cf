import { sign as signAsync, verify as verifySignature } from 'node:crypto';
import { promisify } from 'node:util';
import { unauthorized } from '../../http/errors.ts';
import type { SigningKeyService } from '../signing-keys/service.ts';
import type { Tenant, TenantService } from '../tenants/service.ts';

// With a callback, crypto.sign runs on libuv's thread pool, so RSA signing uses every core.
const sign = promisify(signAsync) as (algorithm: string, data: Buffer, key: import('node:crypto').KeyObject) => Promise<Buffer>;

export interface AccessTokenClaims {
  iss: string;
  sub: string;
  aud: string | string[];
  iat: number;
  exp: number;
  nbf?: number;
  scope?: string;
  gty?: string;
  azp?: string;
}

/** Who is calling, as a verified token says. */
export interface Principal {
  tenantId: string;
  clientId: string;
  scopes: ReadonlySet<string>;
}

export const issuerOf = (domain: string): string => `https://${domain}/`;
export const managementAudienceOf = (domain: string): string => `https://${domain}/api/v2/`;

const encodeJson = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');

interface CachedToken {
  /** The whole token: a hit on its signature counts only when the token is this very one. */
  token: string;
  principal: Principal;
  expiresAtMs: number;
  keysVersion: string;
}

const CACHE_ENTRIES = 10_000;

/**
 * Issues and verifies the Management API's RS256 access tokens. Verification results are cached
 * per token because the signature check dominates request cost; only successes are cached, an entry
 * lives no longer than its token, and it is dropped when the tenant's key set changes.
 *
 * The cache is keyed by the token's signature (its last segment, 342 characters for RS256) rather
 * than the whole token: a token carrying every scope runs to 8 KB, and hashing it anew on every
 * request cost more than the rest of the token check. A hit is then compared with the whole token.
 */
export class AccessTokenService {
  private readonly verified = new Map<string, CachedToken>();

  constructor(
    private readonly keys: SigningKeyService,
    private readonly tenants: TenantService,
    private readonly lifetimeSeconds: number,
  ) {}

  async issue(input: { tenant: Tenant; domain: string; clientId: string; audience: string; scopes: readonly string[] }): Promise<{ accessToken: string; expiresIn: number }> {
    const key = await this.keys.current(input.tenant.id);
    const iat = Math.floor(Date.now() / 1000);
    const header = encodeJson({ alg: 'RS256', typ: 'JWT', kid: key.kid });
    const payload = encodeJson({
      iss: issuerOf(input.domain),
      sub: `${input.clientId}@clients`,
      aud: input.audience,
      iat,
      exp: iat + this.lifetimeSeconds,
      scope: input.scopes.join(' '),
      gty: 'client-credentials',
      azp: input.clientId,
    });
    const signingInput = `${header}.${payload}`;
    const signature = await sign('sha256', Buffer.from(signingInput), key.privateKey);
    return { accessToken: `${signingInput}.${signature.toString('base64url')}`, expiresIn: this.lifetimeSeconds };
  }

  async verify(tenant: Tenant, token: string): Promise<Principal> {
    const keys = await this.keys.verificationKeys(tenant.id);
    const signature = token.slice(token.lastIndexOf('.') + 1);
    const cached = this.verified.get(signature);
    if (cached && cached.token === token) {
      if (cached.principal.tenantId === tenant.id && cached.keysVersion === keys.version && cached.expiresAtMs > Date.now()) return cached.principal;
      this.verified.delete(signature);
    }

    const parts = token.split('.');
    if (parts.length !== 3) throw unauthorized('Invalid token');
    const [encodedHeader, encodedPayload, encodedSignature] = parts as [string, string, string];
    const header = parseSegment(encodedHeader);
    // Only RS256: `none`, HS256 (a classic key-confusion attack) and everything else are refused.
    if (header.alg !== 'RS256') throw unauthorized('Invalid token');
    const key = typeof header.kid === 'string' ? keys.byKid.get(header.kid) : undefined;
    if (!key) throw unauthorized('Invalid signature received for JSON Web Token validation.');
    const valid = verifySignature('sha256', Buffer.from(`${encodedHeader}.${encodedPayload}`), key, Buffer.from(encodedSignature, 'base64url'));
    if (!valid) throw unauthorized('Invalid signature received for JSON Web Token validation.');

    const claims = parseSegment(encodedPayload) as Partial<AccessTokenClaims>;
    const nowSeconds = Math.floor(Date.now() / 1000);
    if (typeof claims.exp !== 'number') throw unauthorized('Invalid token');
    if (claims.exp <= nowSeconds) throw unauthorized('Expired token received for JSON Web Token validation');
    if (claims.nbf !== undefined && (typeof claims.nbf !== 'number' || claims.nbf > nowSeconds)) {
      throw unauthorized('Token not yet valid (nbf) received for JSON Web Token validation');
    }
    const domains = await this.tenants.domains(tenant);
    if (typeof claims.iss !== 'string' || !domains.some((d) => issuerOf(d) === claims.iss)) {
      throw unauthorized(`Bad issuer: ${String(claims.iss)}`);
    }
    const audiences = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
    if (!audiences.some((aud) => domains.some((d) => managementAudienceOf(d) === aud))) {
      throw unauthorized(`Bad audience: ${audiences.join(' ')}`);
    }
    if (typeof claims.sub !== 'string') throw unauthorized('Invalid token');

    const principal: Principal = {
      tenantId: tenant.id,
      clientId: typeof claims.azp === 'string' ? claims.azp : claims.sub.replace(/@clients$/, ''),
      scopes: new Set(typeof claims.scope === 'string' ? claims.scope.split(' ').filter(Boolean) : []),
    };
    if (this.verified.size >= CACHE_ENTRIES) {
      const oldest = this.verified.keys().next().value;
      if (oldest !== undefined) this.verified.delete(oldest);
    }
    this.verified.set(signature, { token, principal, expiresAtMs: claims.exp * 1000, keysVersion: keys.version });
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
  throw unauthorized('Invalid token');
}

