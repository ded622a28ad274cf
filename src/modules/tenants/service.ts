import type { Database, Tx } from '../../db/database.ts';
import { now } from '../../db/database.ts';

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

/** Host names another source (custom domains) maps to tenants; consulted after canonical domains. */
export type HostLookup = (host: string) => Promise<TenantHost | undefined>;
/** Further domains a tenant answers on (custom domains), for issuers and audiences. */
export type DomainsProvider = (tenantId: string) => Promise<string[]>;

const CACHE_MS = 5_000;

/**
 * Tenants and their canonical domains. Lookups by Host are cached for a few seconds because they run
 * on every request; tenants created by another process (the CLI, another node) appear within that time.
 */
export class TenantService {
  private readonly byHost = new Map<string, { found: TenantHost | undefined; until: number }>();
  private only: { tenant: Tenant | undefined; until: number } | undefined;
  private readonly hostLookups: HostLookup[] = [];
  private readonly domainsProviders: DomainsProvider[] = [];
  private readonly domainsCache = new Map<string, { domains: ReadonlySet<string>; until: number }>();
  /** Bumped by forget(): a lookup that was under way meanwhile may have read the old rows, so it is not cached. */
  private generation = 0;

  constructor(private readonly database: Database) {}

  /** Lets another module (custom domains) resolve hosts it owns. */
  addHostLookup(lookup: HostLookup): void {
    this.hostLookups.push(lookup);
  }

  addDomainsProvider(provider: DomainsProvider): void {
    this.domainsProviders.push(provider);
  }

  /** Every domain the tenant answers on, its canonical domain first; verified tokens are checked against it on every request. */
  async domains(tenant: Tenant): Promise<ReadonlySet<string>> {
    const cached = this.domainsCache.get(tenant.id);
    if (cached && cached.until > Date.now()) return cached.domains;
    const generation = this.generation;
    const domains = new Set([tenant.domain]);
    for (const provider of this.domainsProviders) for (const domain of await provider(tenant.id)) domains.add(domain);
    if (generation !== this.generation) return domains;
    if (this.domainsCache.size > 10_000) this.domainsCache.clear();
    this.domainsCache.set(tenant.id, { domains, until: Date.now() + CACHE_MS });
    return domains;
  }

  async create(id: string, domain: string): Promise<Tenant> {
    if (!TENANT_ID_PATTERN.test(id)) throw new Error(`tenant id "${id}" must match ${TENANT_ID_PATTERN}`);
    const tenant = { id, domain: domain.toLowerCase() };
    await this.database.db.insertInto('tenants').values({ ...tenant, created_at: now() }).execute();
    this.forget();
    return tenant;
  }

  /** `trx`: read inside the caller's transaction (on SQLite, one that is open holds the only connection). */
  async get(id: string, trx?: Tx): Promise<Tenant | undefined> {
    return (trx ?? this.database.db).selectFrom('tenants').select(['id', 'domain']).where('id', '=', id).executeTakeFirst();
  }

  async byDomain(domain: string): Promise<Tenant | undefined> {
    return this.database.db
      .selectFrom('tenants')
      .select(['id', 'domain'])
      .where('domain', '=', domain.toLowerCase())
      .executeTakeFirst();
  }

  async list(): Promise<Tenant[]> {
    return this.database.db.selectFrom('tenants').select(['id', 'domain']).orderBy('created_at').execute();
  }

  /**
   * Host header → tenant: the canonical domain (with or without the port), then hosts other modules
   * own; when the server holds a single tenant, it answers on any host.
   */
  async resolve(hostHeader: string | undefined): Promise<TenantHost | undefined> {
    const host = (hostHeader ?? '').toLowerCase();
    const cached = this.byHost.get(host);
    const at = Date.now();
    if (cached && cached.until > at) return cached.found;
    const generation = this.generation;
    let found = await this.lookup(host);
    if (!found) {
      const only = await this.onlyTenant(at);
      found = only && { tenant: only, domain: only.domain };
    }
    if (generation !== this.generation) return found;
    if (this.byHost.size > 10_000) this.byHost.clear();
    this.byHost.set(host, { found, until: at + CACHE_MS });
    return found;
  }

  /** Drops cached lookups, after a change to tenants or the domains they answer on. */
  forget(): void {
    this.generation++;
    this.byHost.clear();
    this.domainsCache.clear();
    this.only = undefined;
  }

  private async lookup(host: string): Promise<TenantHost | undefined> {
    if (host === '') return undefined;
    const withoutPort = host.replace(/:\d+$/, '');
    const candidates = withoutPort === host ? [host] : [host, withoutPort];
    const found = await this.database.db
      .selectFrom('tenants')
      .select(['id', 'domain'])
      .where('domain', 'in', candidates)
      .execute();
    const exact = found.find((t) => t.domain === host) ?? found[0];
    if (exact) return { tenant: exact, domain: exact.domain };
    for (const hostLookup of this.hostLookups) {
      const owned = (await hostLookup(host)) ?? (withoutPort !== host ? await hostLookup(withoutPort) : undefined);
      if (owned) return owned;
    }
    return undefined;
  }

  private async onlyTenant(at: number): Promise<Tenant | undefined> {
    if (this.only && this.only.until > at) return this.only.tenant;
    const generation = this.generation;
    const two = await this.database.db.selectFrom('tenants').select(['id', 'domain']).limit(2).execute();
    const tenant = two.length === 1 ? two[0] : undefined;
    if (generation === this.generation) this.only = { tenant, until: at + CACHE_MS };
    return tenant;
  }
}
