export interface Tenant {
  id: string;
  /** The canonical domain, e.g. `localhost:8080` or `acme.example.com`. */
  domain: string;
}

/** Tenant ids appear as `a0tenant` in events, so they follow its pattern. */
export const TENANT_ID_PATTERN = /^[a-z0-9][-a-z0-9]{1,62}[a-z0-9]$/;

/** The tenant a request reached, and under which of its domains (canonical or custom). */
export interface TenantHost {
  tenant: Tenant;
  domain: string;
  /**
   * Set for a self-managed custom domain, whose requests must come through the operator's proxy: the
   * SHA-256 of the key that proxy sends in `cname-api-key`, or null while no key has been issued.
   */
  cnameApiKeyHash?: string | null;
  /**
   * True for a self-managed domain whose uploaded certificate this server serves itself: a request
   * that reached it over this server's own TLS under that name needs no proxy, hence no key.
   */
  uploadedCertificate?: boolean;
}

/** A tenant could not be created: its id or its domain already belongs to one. */
export class TenantTaken extends Error {
  constructor(
    readonly id: string,
    readonly domain: string,
  ) {
    super(`tenant "${id}" or domain "${domain}" already exists`);
    this.name = 'TenantTaken';
  }
}
