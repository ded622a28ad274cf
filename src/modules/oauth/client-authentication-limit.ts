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

  /**
   * Spends one attempt from both buckets before the secret is compared, so that attempts sent at once
   * cannot all be compared: the seconds to wait when either bucket was empty (nothing is spent then),
   * or 0 when the attempt may go ahead.
   */
  async begin(tenantId: string, clientId: string, ip: string): Promise<number> {
    const keys = [clientKey(tenantId, clientId, ip), addressKey(tenantId, ip)] as const;
    const [client, address] = await Promise.all([
      this.limiters.perClient.take(keys[0]),
      this.limiters.perAddress.take(keys[1]),
    ]);
    if (client.allowed && address.allowed) return 0;
    // Refused before any comparison: the attempt counts against neither bucket.
    await Promise.all([
      client.allowed ? this.limiters.perClient.giveBack(keys[0]) : undefined,
      address.allowed ? this.limiters.perAddress.giveBack(keys[1]) : undefined,
    ]);
    return Math.max(client.retryAfter, address.retryAfter);
  }

  /** The attempt authenticated: it gives back what `begin` spent, so successful grants cost nothing. */
  async succeeded(tenantId: string, clientId: string, ip: string): Promise<void> {
    await Promise.all([
      this.limiters.perClient.giveBack(clientKey(tenantId, clientId, ip)),
      this.limiters.perAddress.giveBack(addressKey(tenantId, ip)),
    ]);
  }
}

const clientKey = (tenantId: string, clientId: string, ip: string) =>
  `token-failures:${tenantId}:${clientAddress(ip)}:${clientId}`;
const addressKey = (tenantId: string, ip: string) => `token-failures:${tenantId}:${clientAddress(ip)}`;
