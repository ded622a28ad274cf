import type { Database, Tx } from '../../db/database.ts';
import { now } from '../../db/database.ts';
import { TenantStore } from './store.ts';
import { TENANT_ID_PATTERN, type Tenant, type TenantHost } from './tenant.ts';
import { BoundedCache, stringBytes } from '../../bounded-cache.ts';

export { TENANT_ID_PATTERN, TenantTaken, type Tenant, type TenantHost } from './tenant.ts';

/** A host another module (custom domains) maps to a tenant: a TenantHost without the tenant's own domain. */
export type CustomHost = Omit<TenantHost, 'tenant'> & { tenantId: string };

/**
 * What tenants ask of the module that adds domains to them (custom domains): consulted for hosts
 * that are no tenant's canonical domain, and for the domains tokens may name.
 */
export interface CustomHosts {
  lookupHost(host: string): Promise<CustomHost | undefined>;
  /** The tenant's further domains, for issuers and audiences. */
  readyDomains(tenantId: string): Promise<string[]>;
}

/**
 * How long a cached read serves, counted from before the read: what another node changed reaches this
 * one within 5 s (the README's promise for revoked keys and deleted domains), however long the read took.
 */
const CACHE_MS = 5_000;
/** Host headers are the client's to choose, up to the header limit: bounded in bytes as well as entries. */
const BY_HOST_BOUNDS = { entries: 10_000, bytes: 4 * 1024 * 1024 };
const DOMAINS_BOUNDS = { entries: 10_000, bytes: 8 * 1024 * 1024 };
const TENANT_BYTES = 512;

/**
 * Tenants and their canonical domains. Lookups by Host are cached for a few seconds because they run
 * on every request; tenants created by another process (the CLI, another node) appear within that time.
 */
export class TenantService {
  private readonly byHost = new BoundedCache<{ found: TenantHost | undefined; until: number }>(BY_HOST_BOUNDS);
  private only: { tenant: Tenant | undefined; until: number } | undefined;
  private readonly domainsCache = new BoundedCache<{ domains: ReadonlySet<string>; until: number }>(DOMAINS_BOUNDS);
  /** Bumped by forget(): a lookup that was under way meanwhile may have read the old rows, so it is not cached. */
  private generation = 0;

  constructor(
    private readonly store: TenantStore,
    private readonly customHosts: CustomHosts,
  ) {}

  /** Tenants read by their canonical domains alone, for a command that opens the database without the server. */
  static reading(database: Database): TenantService {
    return new TenantService(new TenantStore(database), {
      lookupHost: async () => undefined,
      readyDomains: async () => [],
    });
  }

  /**
   * Every domain the tenant answers on, its canonical domain first; verified tokens are checked against
   * it on every request.
   */
  async domains(tenant: Tenant): Promise<ReadonlySet<string>> {
    const cached = this.domainsCache.get(tenant.id);
    if (cached && cached.until > Date.now()) return cached.domains;
    const generation = this.generation;
    const at = Date.now();
    const domains = new Set([tenant.domain]);
    for (const domain of await this.customHosts.readyDomains(tenant.id)) domains.add(domain);
    if (generation !== this.generation) return domains;
    this.domainsCache.set(
      tenant.id,
      { domains, until: at + CACHE_MS },
      [...domains].reduce((sum, domain) => sum + stringBytes(domain), 0),
    );
    return domains;
  }

  /** Adds a tenant; TenantTaken when its id or domain already belongs to one. */
  async create(id: string, domain: string): Promise<Tenant> {
    if (!TENANT_ID_PATTERN.test(id)) throw new Error(`tenant id "${id}" must match ${TENANT_ID_PATTERN}`);
    const tenant = { id, domain: domain.toLowerCase() };
    await this.store.insert(tenant, now());
    this.forget();
    return tenant;
  }

  /** The tenant of this id; in `trx` when given (another module's transaction reading it). */
  async get(id: string, trx?: Tx): Promise<Tenant | undefined> {
    return this.store.get(id, trx);
  }

  /** The tenant whose canonical domain this is; in `trx` when given. */
  async byDomain(domain: string, trx?: Tx): Promise<Tenant | undefined> {
    return this.store.byDomain(domain.toLowerCase(), trx);
  }

  async list(): Promise<Tenant[]> {
    return this.store.list();
  }

  /**
   * Holds the tenant until `trx` ends: writes of one tenant that take this run one after another
   * (custom domain creations, so that the per-tenant cap holds under concurrency).
   */
  async lock(trx: Tx, id: string): Promise<void> {
    await this.store.lock(trx, id);
  }

  /**
   * Host header → tenant: the canonical domain (with or without the port), then custom domains;
   * when the server holds a single tenant, it answers on any host.
   */
  /**
   * What resolve() would answer from the cache alone, without waiting: the cached entry (its `found`
   * undefined when the Host names no tenant), or undefined when the cache does not hold the Host.
   * The request pipeline takes it to stay synchronous on the hot path.
   */
  resolveCached(hostHeader: string | undefined): { readonly found: TenantHost | undefined } | undefined {
    const cached = this.byHost.get((hostHeader ?? '').toLowerCase());
    return cached && cached.until > Date.now() ? cached : undefined;
  }

  /** What domains() would answer from the cache alone; undefined when it would have to read. */
  domainsCached(tenant: Tenant): ReadonlySet<string> | undefined {
    const cached = this.domainsCache.get(tenant.id);
    return cached && cached.until > Date.now() ? cached.domains : undefined;
  }

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
    // A tenant row (ids, name, domain) is charged a fixed few hundred bytes.
    this.byHost.set(host, { found, until: at + CACHE_MS }, found ? TENANT_BYTES : 0);
    return found;
  }

  /**
   * Drops cached lookups, after a change to tenants or the domains they answer on (custom domains
   * call it after each change they commit).
   */
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
    const found = await this.store.byDomains(candidates);
    const exact = found.find((t) => t.domain === host) ?? found[0];
    if (exact) return { tenant: exact, domain: exact.domain };
    const custom =
      (await this.customHosts.lookupHost(host)) ??
      (withoutPort !== host ? await this.customHosts.lookupHost(withoutPort) : undefined);
    if (!custom) return undefined;
    const { tenantId, ...reached } = custom;
    const tenant = await this.store.get(tenantId);
    return tenant && { tenant, ...reached };
  }

  private async onlyTenant(at: number): Promise<Tenant | undefined> {
    if (this.only && this.only.until > at) return this.only.tenant;
    const generation = this.generation;
    const two = await this.store.firstTwo();
    const tenant = two.length === 1 ? two[0] : undefined;
    if (generation === this.generation) this.only = { tenant, until: at + CACHE_MS };
    return tenant;
  }
}
