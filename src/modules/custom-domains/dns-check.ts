import { Resolver } from 'node:dns/promises';
import type { CustomDomainRow } from './store.ts';

/** What one DNS check found: ok, or why not, in words an operator can act on. */
export type Check = { ok: true } | { ok: false; error: string };

/** Name of the TXT record proving control of a self-managed domain. */
export const txtRecordName = (domain: string): string => `_svc-custom-domain.${domain}`;

const clean = (name: string): string => name.toLowerCase().replace(/\.$/, '');

/**
 * Asks DNS (the configured resolvers, or the system's) whether a domain's verification record is in place.
 * Only authoritative data decides: resolver errors are reported, never treated as success.
 */
export class DnsCheck {
  constructor(
    private readonly servers: readonly string[],
    private readonly timeoutMs = 2_000,
  ) {}

  /** The record a domain is verified by: a CNAME for svc-managed certificates, a TXT record for self-managed ones. */
  check(domain: Pick<CustomDomainRow, 'type' | 'domain' | 'verification_record'>): Promise<Check> {
    return domain.type === 'svc_managed_certs'
      ? this.checkCname(domain.domain, domain.verification_record)
      : this.checkTxt(domain.domain, domain.verification_record);
  }

  private resolver(): Resolver {
    const resolver = new Resolver({ timeout: this.timeoutMs, tries: 2 });
    if (this.servers.length > 0) resolver.setServers([...this.servers]);
    return resolver;
  }

  async checkCname(domain: string, expected: string): Promise<Check> {
    let answers: string[];
    try {
      answers = await this.resolver().resolveCname(domain);
    } catch (error) {
      return {
        ok: false,
        error: `No CNAME record found for ${domain} (${describe(error)}); expected one pointing to ${expected}`,
      };
    }
    if (answers.some((a) => clean(a) === clean(expected))) return { ok: true };
    return {
      ok: false,
      error: `CNAME record for ${domain} resolves to ${answers.map(clean).join(', ')}, expected ${expected}`,
    };
  }

  async checkTxt(domain: string, expected: string): Promise<Check> {
    const name = txtRecordName(domain);
    let answers: string[][];
    try {
      answers = await this.resolver().resolveTxt(name);
    } catch (error) {
      return { ok: false, error: `No TXT record found for ${name} (${describe(error)}); expected "${expected}"` };
    }
    const values = answers.map((chunks) => chunks.join(''));
    if (values.includes(expected)) return { ok: true };
    return {
      ok: false,
      error: `TXT records for ${name} are ${values.map((v) => `"${v}"`).join(', ')}, expected "${expected}"`,
    };
  }
}

function describe(error: unknown): string {
  const code = (error as { code?: string } | null)?.code;
  return code ?? String(error);
}
