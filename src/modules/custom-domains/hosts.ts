import type { CustomHost, CustomHosts } from '../tenants/service.ts';
import type { CustomDomainStore } from './store.ts';

/**
 * What custom domains add to tenants, for the tenant service: the hosts they reach and the domains
 * tokens may name. Read from the store directly, so tenants can be built before the custom domain
 * service (which needs them).
 */
export class CustomDomainHosts implements CustomHosts {
  constructor(private readonly store: CustomDomainStore) {}

  /** A ready custom domain reaches its tenant (a self-managed one only with its key). */
  async lookupHost(host: string): Promise<CustomHost | undefined> {
    const found = await this.store.readyHost(host.toLowerCase());
    if (!found) return undefined;
    const reached: CustomHost = { tenantId: found.tenantId, domain: found.domain };
    // The server terminates TLS for svc-managed domains; self-managed ones are reached through the operator's proxy.
    if (found.type !== 'self_managed_certs') return reached;
    // Only self-managed domains read whether a certificate is stored: the server issues certificates
    // only for svc-managed ones, so for these it is one the operator uploaded.
    return { ...reached, cnameApiKeyHash: found.cnameApiKeyHash, uploadedCertificate: found.hasCertificate };
  }

  /** The tenant's ready custom domains. */
  async readyDomains(tenantId: string): Promise<string[]> {
    return this.store.readyHostnames(tenantId);
  }
}
