import type { Tx } from '../../db/database.ts';
import { now } from '../../db/database.ts';
import { customDomainError } from '../../http/errors.ts';
import type { Tenant } from '../tenants/service.ts';
import type { CustomDomain, CustomDomainRecords } from './record.ts';
import type { CustomDomainRow, CustomDomainStore } from './store.ts';

/** The canonical domain when it is the default: the original answers with just its name. */
export type DefaultDomainRecord = CustomDomain | { domain: string };

/**
 * The tenant's default domain: exactly one at any time, a ready custom domain or else the canonical
 * domain (no defaults row). Emails and links use it unless a request names another.
 */
export class DefaultDomain {
  constructor(
    private readonly store: CustomDomainStore,
    private readonly records: CustomDomainRecords,
  ) {}

  async get(tenant: Tenant): Promise<DefaultDomainRecord> {
    const defaultId = await this.store.defaultId(tenant.id);
    if (defaultId === undefined) return { domain: tenant.domain };
    const row = await this.store.byId(defaultId);
    return row ? this.records.one(row, defaultId) : { domain: tenant.domain };
  }

  /** Makes `hostname` the default: the canonical domain, or one of the tenant's ready custom domains. */
  async set(tenant: Tenant, hostname: string): Promise<DefaultDomainRecord> {
    const domain = hostname.toLowerCase();
    return this.store.transaction(async (trx) => {
      if (domain === tenant.domain) {
        await this.store.clearDefault(trx, tenant.id);
        return { domain: tenant.domain };
      }
      const row = await this.store.findByHostname(trx, tenant.id, domain, true);
      if (!row || row.status !== 'ready') throw customDomainError.mustBeVerified();
      await this.store.setDefault(trx, tenant.id, row.id, now());
      return this.records.one(row, row.id, { trx });
    });
  }

  /**
   * An update's `is_default` on domain `current`, in its transaction: true makes the (ready) domain the
   * default, false gives the default back to the canonical domain. Yields the default's id afterwards.
   */
  async apply(trx: Tx, current: CustomDomainRow, isDefault: boolean | undefined): Promise<string | undefined> {
    // Read locked, after `current`'s row (the caller's lock), as every writer of the defaults row does:
    // read without it, another node's "set default" committed meanwhile was undone by the clear below.
    const defaultId = await this.store.defaultId(current.tenant_id, trx, true);
    if (isDefault === true && defaultId !== current.id) {
      if (current.status !== 'ready') throw customDomainError.mustBeVerified();
      await this.store.setDefault(trx, current.tenant_id, current.id, now());
      return current.id;
    }
    if (isDefault === false && defaultId === current.id) {
      await this.store.clearDefault(trx, current.tenant_id);
      return undefined;
    }
    return defaultId;
  }
}
