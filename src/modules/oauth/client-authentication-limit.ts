import { clientAddress } from '../../http/client-address.ts';
import type { RateLimiter } from '../../http/rate-limit.ts';

/**
 * Slows the guessing of client secrets at /oauth/token. Only failures are counted: per client id and
 * address, so an attacker elsewhere cannot lock a client out of its own address, and per tenant and
 * address, so one address cannot spray guesses across many client ids of a tenant, nor lock other
 * tenants' clients out of that address. While either bucket is empty every
 * attempt from there is refused before the secret is compared, the right one too: otherwise the
 * limit would only hide which guess was right. Successful grants spend nothing.
 */
export class ClientAuthenticationLimit {
  constructor(private readonly limiters: { perClient: RateLimiter; perAddress: RateLimiter }) {}

  /** Seconds to wait before trying again, or 0 when an attempt may go ahead. */
  async retryAfter(tenantId: string, clientId: string, ip: string): Promise<number> {
    const [client, address] = await Promise.all([
      this.limiters.perClient.peek(clientKey(tenantId, clientId, ip)),
      this.limiters.perAddress.peek(addressKey(tenantId, ip)),
    ]);
    return client.allowed && address.allowed ? 0 : Math.max(client.retryAfter, address.retryAfter);
  }

  async failed(tenantId: string, clientId: string, ip: string): Promise<void> {
    await Promise.all([
      this.limiters.perClient.take(clientKey(tenantId, clientId, ip)),
      this.limiters.perAddress.take(addressKey(tenantId, ip)),
    ]);
  }
}

const clientKey = (tenantId: string, clientId: string, ip: string) => `token-failures:${tenantId}:${clientAddress(ip)}:${clientId}`;
const addressKey = (tenantId: string, ip: string) => `token-failures:${tenantId}:${clientAddress(ip)}`;
