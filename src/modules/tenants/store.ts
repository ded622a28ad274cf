import type { Database, Tx } from '../../db/database.ts';
import { uniqueOr } from '../../db/database.ts';
import { TenantTaken, type Tenant } from './tenant.ts';

/** Every query on `tenants`. */
export class TenantStore {
  constructor(private readonly database: Database) {}

  /** Adds a tenant; TenantTaken when its id or domain is already taken. */
  async insert(tenant: Tenant, createdAt: string): Promise<void> {
    await uniqueOr(
      this.database.db
        .insertInto('tenants')
        .values({ ...tenant, created_at: createdAt })
        .execute(),
      () => new TenantTaken(tenant.id, tenant.domain),
    );
  }

  async get(id: string, trx?: Tx): Promise<Tenant | undefined> {
    return (trx ?? this.database.db)
      .selectFrom('tenants')
      .select(['id', 'domain'])
      .where('id', '=', id)
      .executeTakeFirst();
  }

  async byDomain(domain: string, trx?: Tx): Promise<Tenant | undefined> {
    return (trx ?? this.database.db)
      .selectFrom('tenants')
      .select(['id', 'domain'])
      .where('domain', '=', domain)
      .executeTakeFirst();
  }

  /** The tenants whose canonical domain is one of `domains`. */
  async byDomains(domains: readonly string[]): Promise<Tenant[]> {
    return this.database.db.selectFrom('tenants').select(['id', 'domain']).where('domain', 'in', domains).execute();
  }

  async list(): Promise<Tenant[]> {
    return this.database.db.selectFrom('tenants').select(['id', 'domain']).orderBy('created_at').execute();
  }

  /** Up to two tenants: enough to tell whether the server holds exactly one. */
  async firstTwo(): Promise<Tenant[]> {
    return this.database.db.selectFrom('tenants').select(['id', 'domain']).limit(2).execute();
  }

  /**
   * Locks the tenant's row until `trx` ends, so that transactions taking the lock run one after
   * another. PostgreSQL only: SQLite transactions hold the write lock from their start anyway.
   */
  async lock(trx: Tx, id: string): Promise<void> {
    if (this.database.dialect !== 'postgres') return;
    await trx.selectFrom('tenants').select('id').where('id', '=', id).forUpdate().execute();
  }
}
