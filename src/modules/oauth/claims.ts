import { tokenRefused } from '../../http/errors.ts';

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

export const issuerOf = (domain: string): string => `https://${domain}/`;
export const managementAudienceOf = (domain: string): string => `https://${domain}/api/v2/`;

/** The inverse of issuerOf and managementAudienceOf, so a claim is checked with one Set lookup. */
const domainIn = (claim: unknown, suffix: string): string | undefined =>
  typeof claim === 'string' &&
  claim.length > 8 + suffix.length &&
  claim.startsWith('https://') &&
  claim.endsWith(suffix)
    ? claim.slice(8, -suffix.length)
    : undefined;
export const domainOfIssuer = (iss: unknown): string | undefined => domainIn(iss, '/');
export const domainOfAudience = (aud: unknown): string | undefined => domainIn(aud, '/api/v2/');

/** What the claims of a token with a valid signature establish. */
export interface CheckedClaims {
  /** The tenant's domains its issuer and (first matching) audience name: the token is good while both still are. */
  issuerDomain: string;
  audienceDomain: string;
  clientId: string;
  scopes: ReadonlySet<string>;
  expiresAtMs: number;
}

/**
 * Checks the claims of a token whose signature was verified, at `nowSeconds`, against the domains its
 * tenant answers on, in the original's order: expiry, not-before, issuer, audience, subject. A
 * refusal throws the 401 the original answers with.
 */
export function checkClaims(
  claims: Partial<AccessTokenClaims>,
  nowSeconds: number,
  domains: ReadonlySet<string>,
): CheckedClaims {
  if (typeof claims.exp !== 'number') throw tokenRefused.invalid();
  if (claims.exp <= nowSeconds) throw tokenRefused.expired();
  if (claims.nbf !== undefined && (typeof claims.nbf !== 'number' || claims.nbf > nowSeconds)) {
    throw tokenRefused.notYetValid();
  }
  const issuerDomain = domainOfIssuer(claims.iss);
  if (issuerDomain === undefined || !domains.has(issuerDomain)) throw tokenRefused.badIssuer(claims.iss);
  const audiences = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  const audienceDomain = audiences.map(domainOfAudience).find((domain) => domain !== undefined && domains.has(domain));
  if (audienceDomain === undefined) throw tokenRefused.badAudience(audiences);
  if (typeof claims.sub !== 'string') throw tokenRefused.invalid();
  return {
    issuerDomain,
    audienceDomain,
    clientId: typeof claims.azp === 'string' ? claims.azp : claims.sub.replace(/@clients$/, ''),
    scopes: new Set(typeof claims.scope === 'string' ? claims.scope.split(' ').filter(Boolean) : []),
    expiresAtMs: claims.exp * 1000,
  };
}
