import { issuerOf } from './claims.ts';
import { ALL_SCOPES } from './scopes.ts';

/**
 * The authorization server's metadata (RFC 8414; the same document at OpenID Connect Discovery's
 * address), for the domain a request came through: a tenant's canonical domain or one of its ready
 * custom domains, each its own issuer. What resource-server libraries read to verify tokens
 * (`issuer`, `jwks_uri`, the signing algorithm) and what client libraries read to get one
 * (`token_endpoint`, its grant and its client authentication methods). Every value is true of this
 * server: the client-credentials grant only, no authorization endpoint (so no response type), access
 * tokens signed RS256, the Management API's scopes.
 */
export function discoveryDocument(domain: string) {
  const issuer = issuerOf(domain);
  return {
    issuer,
    jwks_uri: `${issuer}.well-known/jwks.json`,
    token_endpoint: `${issuer}oauth/token`,
    grant_types_supported: ['client_credentials'],
    token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
    response_types_supported: [] as string[],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: ['RS256'],
    scopes_supported: ALL_SCOPES,
  };
}
