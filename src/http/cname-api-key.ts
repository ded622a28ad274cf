import { secretMatches } from '../secret-hash.ts';
import { cnameApiKeyRefused } from './errors.ts';

/**
 * The `cname-api-key` header: the operator's proxy in front of a self-managed custom domain proves with
 * it that the request came through that proxy. Only the key's hash is stored (see secret-hash.ts).
 */
export const CNAME_API_KEY_HEADER = 'cname-api-key';

/**
 * Refuses a request to a self-managed custom domain unless it carries the domain's key. `hash` is
 * null while the domain has no key yet (it becomes ready through a background check; the key is
 * handed out by its first verify call). The hashes are compared in constant time.
 */
export function checkCnameApiKey(domain: string, hash: string | null, header: string | string[] | undefined): void {
  if (header === undefined || header === '') {
    throw cnameApiKeyRefused(
      `Missing ${CNAME_API_KEY_HEADER} header: requests to the self-managed custom domain ${domain} must come through its proxy`,
    );
  }
  if (hash === null) {
    throw cnameApiKeyRefused(
      `The self-managed custom domain ${domain} has no ${CNAME_API_KEY_HEADER} yet: verify the domain to receive it`,
    );
  }
  if (Array.isArray(header) || !secretMatches(hash, header)) {
    throw cnameApiKeyRefused(`Invalid ${CNAME_API_KEY_HEADER} header for the self-managed custom domain ${domain}`);
  }
}
