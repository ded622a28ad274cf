import { randomBytes, randomUUID } from 'node:crypto';
import type { Selectable } from 'kysely';
import type { Database, Tx } from '../../db/database.ts';
import { isUniqueViolation, now, uniqueOr } from '../../db/database.ts';
import type { CustomDomainsTable } from '../../db/schema.ts';
import { hashSecret } from '../../secret-hash.ts';
import { ApiError, badRequest, conflict } from '../../http/errors.ts';
import { newId } from '../../ids.ts';
import type { Tenant, TenantHost, TenantService } from '../tenants/service.ts';
import type { CreateCustomDomainBody, ListCustomDomainsQuery, UpdateCustomDomainBody } from './schema.ts';
import type { ClaimedCheck } from './rechecks.ts';
import { txtRecordName, type Check, type DomainVerifier } from './verification.ts';
import { decodeCursor, encodeCursor } from '../../http/cursor.ts';

type Row = Selectable<CustomDomainsTable>;
export type CustomDomainType = CustomDomainsTable['type'];

export interface CustomDomain {
  custom_domain_id: string;
  domain: string;
  primary: boolean;
  is_default?: boolean;
  status: CustomDomainsTable['status'];
  type: CustomDomainType;
  verification: {
    methods: Array<{ name: 'CNAME' | 'TXT'; record: string; domain: string }>;
    status?: string;
    error_msg?: string;
    last_verified_at?: string;
  };
  custom_client_ip_header?: string | null;
  tls_policy?: string;
  domain_metadata?: Record<string, string>;
  created_at: string;
  relying_party_identifier?: string;
  cname_api_key?: string;
}

/** A custom domain as choosing an email's domain sees it. */
export interface EmailDomain {
  domain: string;
  status: CustomDomainsTable['status'];
  domain_metadata: Record<string, string>;
  is_default: boolean;
}

export const customDomainNotFound = (id: string) =>
  new ApiError(404, `The custom domain ${id} does not exist`, 'inexistent_custom_domain');
const alreadyExists = () => conflict('Custom domain already exists.');
const tooMany = () => conflict('You reached the maximum number of custom domains for your account.');
const mustBeVerified = () => badRequest.body('The domain must be verified before it can be set as default.');
const deletingDefault = () =>
  conflict('Cannot delete the default custom domain. Please set another domain as default before deleting this one.');

const alreadyVerified = () => badRequest.body('Custom domain already verified.');

const DEFAULT_TAKE = 50;
/** Nested timestamps of the original carry no milliseconds (`2026-03-12T09:23:36Z`). */
const seconds = (iso: string) => iso.replace(/\.\d{3}Z$/, 'Z');

/** relying_party_identifier must be the domain or a suffix of it with at least two labels (no public suffix list). */
function checkRelyingParty(domain: string, rpi: string | null | undefined): void {
  if (rpi === undefined || rpi === null) return;
  const id = rpi.toLowerCase();
  if (id === domain || (id.includes('.') && domain.endsWith(`.${id}`))) return;
  throw badRequest.body("The 'relying_party_identifier' must be equal to or a registrable domain suffix of the domain.");
}

function checkTypeMembers(type: CustomDomainType, input: { tls_policy?: string; custom_client_ip_header?: string | null }): void {
  if (type === 'self_managed_certs' && input.tls_policy !== undefined) {
    throw badRequest.body("The 'tls_policy' cannot be set on self_managed domains");
  }
  if (type === 'svc_managed_certs' && input.custom_client_ip_header !== undefined) {
    throw badRequest.body("The 'custom_client_ip_header' cannot be set on svc_managed domains");
  }
}

function tooManyMetadataKeys(count: number): ApiError {
  return badRequest.body(`Payload validation error: 'Too many properties defined (${count}), must be at most 10' on property domain_metadata.`);
}

export interface CustomDomainSettings {
  edgeDomain: string;
  maxPerTenant: number;
  /** Pending domains are re-checked in the background for this long after creation, then failed. */
  verifyWindowMs: number;
  /** Delay before the first background re-check; it doubles after each, up to recheckMaxMs. */
  recheckInitialMs: number;
  recheckMaxMs: number;
}

/** What a DNS check makes of a domain's status and verification members. */
type Verdict = Pick<Row, 'status' | 'verification_status' | 'verification_error'> & { last_verified_at?: string };

/**
 * The verdict on a domain whose hostname another tenant's domain was verified for first: only a ready
 * domain reserves its hostname, so this one has lost it (until that domain is deleted).
 */
const TAKEN: Verdict = {
  status: 'failed',
  verification_status: 'failed',
  verification_error: 'The domain is already verified by another tenant.',
};

/** A self-managed domain that is ready but whose cname-api-key was never handed out. */
const awaitsApiKey = (row: Row) => row.type === 'self_managed_certs' && row.status === 'ready' && row.cname_api_key_hash === null;

/** `48 hours`, `10 minutes`, `5 seconds`: the window as the failure message states it. */
function describeWindow(ms: number): string {
  const seconds = Math.round(ms / 1000);
  const [count, unit] = seconds % 3600 === 0 ? [seconds / 3600, 'hour'] : seconds % 60 === 0 ? [seconds / 60, 'minute'] : [seconds, 'second'];
  return `${count} ${unit}${count === 1 ? '' : 's'}`;
}

export class CustomDomainService {
  constructor(
    private readonly database: Database,
    private readonly tenants: TenantService,
    private readonly verifier: DomainVerifier,
    private readonly settings: CustomDomainSettings,
  ) {}

  private readonly readyListeners: Array<(domain: string) => void> = [];

  /** Told the hostname of each domain that becomes ready, by a verify call or a background check. */
  onReady(listener: (domain: string) => void): void {
    this.readyListeners.push(listener);
  }

  /** CNAME target of an svc-managed domain: `<tenant>-cd-<id without cd_, lower-cased>.<edge domain>`. */
  cnameTarget(tenantId: string, id: string): string {
    return `${tenantId}-cd-${id.slice(3).toLowerCase()}.${this.settings.edgeDomain}`;
  }

  private present(row: Row, defaultId: string | undefined, withDefault = true): CustomDomain {
    const method =
      row.type === 'svc_managed_certs'
        ? { name: 'CNAME' as const, record: row.verification_record, domain: row.domain }
        : { name: 'TXT' as const, record: row.verification_record, domain: txtRecordName(row.domain) };
    return {
      custom_domain_id: row.id,
      domain: row.domain,
      primary: row.is_primary === 1,
      ...(withDefault ? { is_default: row.id === defaultId } : {}),
      status: row.status,
      type: row.type,
      verification: {
        methods: [method],
        ...(row.verification_status === null ? {} : { status: row.verification_status }),
        ...(row.verification_error === null ? {} : { error_msg: row.verification_error }),
        ...(row.last_verified_at === null ? {} : { last_verified_at: row.last_verified_at }),
      },
      ...(row.type === 'self_managed_certs' ? { custom_client_ip_header: row.custom_client_ip_header } : {}),
      ...(row.type === 'svc_managed_certs' ? { tls_policy: row.tls_policy ?? 'recommended' } : {}),
      ...(row.domain_metadata === null ? {} : { domain_metadata: JSON.parse(row.domain_metadata) as Record<string, string> }),
      created_at: row.created_at,
      ...(row.relying_party_identifier === null ? {} : { relying_party_identifier: row.relying_party_identifier }),
    };
  }

  private async defaultId(db: Database['db'] | Tx, tenantId: string): Promise<string | undefined> {
    const row = await db.selectFrom('custom_domain_defaults').select('custom_domain_id').where('tenant_id', '=', tenantId).executeTakeFirst();
    return row?.custom_domain_id;
  }

  private async row(db: Database['db'] | Tx, tenantId: string, id: string, lock = false): Promise<Row> {
    const row = await db
      .selectFrom('custom_domains')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .$if(lock && this.database.dialect === 'postgres', (q) => q.forUpdate())
      .executeTakeFirst();
    if (!row) throw customDomainNotFound(id);
    return row;
  }

  async create(tenantId: string, input: CreateCustomDomainBody): Promise<CustomDomain> {
    const type: CustomDomainType = input.type === 'self_managed_certs' ? 'self_managed_certs' : 'svc_managed_certs';
    const domain = input.domain.toLowerCase();
    checkTypeMembers(type, input);
    checkRelyingParty(domain, input.relying_party_identifier);
    const metadata = input.domain_metadata === undefined
      ? null
      : Object.fromEntries(Object.entries(input.domain_metadata).filter(([, v]) => v !== null));
    const id = newId.customDomain();
    const createdAt = now();
    const row = await uniqueOr(
      this.database.db.transaction().execute(async (trx) => {
        // Creations of one tenant run one after another, so the per-tenant cap holds under concurrency.
        if (this.database.dialect === 'postgres') {
          await trx.selectFrom('tenants').select('id').where('id', '=', tenantId).forUpdate().execute();
        }
        // A tenant's canonical domain cannot be claimed as a custom domain, nor a hostname verified for
        // another tenant; one merely pending elsewhere can: the first to verify it owns it. The same
        // tenant adding a hostname twice meets the unique index on (tenant, hostname).
        const canonical = await trx.selectFrom('tenants').select('id').where('domain', '=', domain).executeTakeFirst();
        if (canonical) throw alreadyExists();
        if (await this.hostnameTaken(trx, { id, domain })) throw alreadyExists();
        const existing = await trx.selectFrom('custom_domains').select(['id', 'is_primary']).where('tenant_id', '=', tenantId).execute();
        if (existing.length >= this.settings.maxPerTenant) throw tooMany();
        const row: Row = {
          id,
          tenant_id: tenantId,
          domain,
          type,
          status: 'pending_verification',
          is_primary: existing.some((e) => e.is_primary === 1) ? 0 : 1,
          verification_record: type === 'svc_managed_certs' ? this.cnameTarget(tenantId, id) : randomUUID(),
          verification_status: null,
          verification_error: null,
          last_verified_at: null,
          custom_client_ip_header: type === 'self_managed_certs' ? (input.custom_client_ip_header ?? null) : null,
          tls_policy: type === 'svc_managed_certs' ? (input.tls_policy ?? 'recommended') : null,
          domain_metadata: metadata === null ? null : JSON.stringify(metadata),
          relying_party_identifier: input.relying_party_identifier?.toLowerCase() ?? null,
          cname_api_key_hash: null,
          created_at: createdAt,
          next_check_at: new Date(Date.parse(createdAt) + this.recheckDelay(0)).toISOString(),
          check_count: 0,
          check_claimed_until: null,
        };
        await trx.insertInto('custom_domains').values(row).execute();
        return row;
      }),
      alreadyExists,
    );
    this.tenants.forget();
    return this.present(row, undefined);
  }

  async get(tenantId: string, id: string): Promise<CustomDomain> {
    const db = this.database.db;
    return this.present(await this.row(db, tenantId, id), await this.defaultId(db, tenantId));
  }

  async list(tenantId: string, query: ListCustomDomainsQuery): Promise<CustomDomain[] | { custom_domains: CustomDomain[]; next?: string }> {
    const db = this.database.db;
    let select = db.selectFrom('custom_domains').selectAll().where('tenant_id', '=', tenantId);
    if (query.q !== undefined && query.q.trim() !== '') {
      // Hostname characters only, so the value never carries LIKE wildcards of its own.
      const match = /^domain:"?([A-Za-z0-9.-]*)(\*)?"?$/.exec(query.q.trim());
      if (!match) throw badRequest.query(`Query validation error: 'Invalid query: only domain:<value> and domain:<prefix>* are supported' on property q.`);
      const value = (match[1] ?? '').toLowerCase();
      select = match[2] ? select.where('domain', 'like', `${value}%`) : select.where('domain', '=', value);
    }
    const paged = query.take !== undefined || query.from !== undefined;
    const take = query.take ?? DEFAULT_TAKE;
    if (query.from !== undefined) {
      select = select.where('domain', '>', decodeCursor(query.from, () => true));
    }
    const rows = await select.orderBy('domain').$if(paged, (q) => q.limit(take + 1)).execute();
    const defaultId = await this.defaultId(db, tenantId);
    const page = paged ? rows.slice(0, take) : rows;
    const items = page.map((r) => project(this.present(r, defaultId), query.fields, query.include_fields));
    if (!paged) return items;
    const last = page[page.length - 1];
    return { custom_domains: items, ...(rows.length > take && last ? { next: encodeCursor(last.domain) } : {}) };
  }

  async update(tenantId: string, id: string, input: UpdateCustomDomainBody): Promise<CustomDomain> {
    const result = await this.database.db.transaction().execute(async (trx) => {
      const current = await this.row(trx, tenantId, id, true);
      checkTypeMembers(current.type, input);
      checkRelyingParty(current.domain, input.relying_party_identifier);
      let metadata = current.domain_metadata;
      if (input.domain_metadata !== undefined) {
        const merged: Record<string, string> = current.domain_metadata === null ? {} : JSON.parse(current.domain_metadata);
        for (const [key, value] of Object.entries(input.domain_metadata)) {
          if (value === null) delete merged[key];
          else merged[key] = value;
        }
        const count = Object.keys(merged).length;
        if (count > 10) throw tooManyMetadataKeys(count);
        metadata = JSON.stringify(merged);
      }
      const changed: Row = {
        ...current,
        ...(input.tls_policy === undefined ? {} : { tls_policy: input.tls_policy }),
        ...(input.custom_client_ip_header === undefined ? {} : { custom_client_ip_header: input.custom_client_ip_header }),
        ...(input.relying_party_identifier === undefined ? {} : { relying_party_identifier: input.relying_party_identifier?.toLowerCase() ?? null }),
        domain_metadata: metadata,
      };
      await trx
        .updateTable('custom_domains')
        .set({
          tls_policy: changed.tls_policy,
          custom_client_ip_header: changed.custom_client_ip_header,
          relying_party_identifier: changed.relying_party_identifier,
          domain_metadata: changed.domain_metadata,
        })
        .where('id', '=', id)
        .execute();
      let defaultId = await this.defaultId(trx, tenantId);
      if (input.is_default === true && defaultId !== id) {
        if (current.status !== 'ready') throw mustBeVerified();
        await this.makeDefault(trx, tenantId, id);
        defaultId = id;
      } else if (input.is_default === false && defaultId === id) {
        // The canonical domain becomes the default again: there is always exactly one.
        await trx.deleteFrom('custom_domain_defaults').where('tenant_id', '=', tenantId).execute();
        defaultId = undefined;
      }
      return this.present(changed, defaultId);
    });
    this.tenants.forget();
    return result;
  }

  private async makeDefault(trx: Tx, tenantId: string, id: string): Promise<void> {
    const at = now();
    await trx
      .insertInto('custom_domain_defaults')
      .values({ tenant_id: tenantId, custom_domain_id: id, updated_at: at })
      .onConflict((oc) => oc.column('tenant_id').doUpdateSet({ custom_domain_id: id, updated_at: at }))
      .execute();
  }

  async delete(tenantId: string, id: string): Promise<void> {
    await this.database.db.transaction().execute(async (trx) => {
      // The defaults row is locked first, so a concurrent "set default" cannot slip in between check and delete.
      const current = await trx
        .selectFrom('custom_domain_defaults')
        .select('custom_domain_id')
        .where('tenant_id', '=', tenantId)
        .$if(this.database.dialect === 'postgres', (q) => q.forUpdate())
        .executeTakeFirst();
      await this.row(trx, tenantId, id, true);
      if (current?.custom_domain_id === id) throw deletingDefault();
      await trx.deleteFrom('custom_domains').where('tenant_id', '=', tenantId).where('id', '=', id).execute();
    });
    this.tenants.forget();
  }

  /**
   * Checks DNS now; on success the domain is ready. A self-managed domain receives its cname-api-key
   * from the first verify that finds it ready (also when a background check made it so), and only then.
   */
  async verify(tenantId: string, id: string): Promise<CustomDomain> {
    const before = await this.row(this.database.db, tenantId, id);
    if (before.status === 'ready' && !awaitsApiKey(before)) throw alreadyVerified();
    const check: Check = before.status === 'ready' ? { ok: true } : await this.check(before);
    const at = new Date();
    const outcome = await this.takenOnRace(id, this.database.db.transaction().execute(async (trx) => {
      const current = await this.row(trx, tenantId, id, true);
      if (current.status === 'ready' && !awaitsApiKey(current)) throw alreadyVerified();
      let changed: Row = current;
      let apiKey: string | undefined;
      if (current.status !== 'ready') {
        const verdict = (await this.hostnameTaken(trx, current)) ? TAKEN : this.verdict(current, check, at);
        // A settled domain leaves the background schedule; a pending one keeps its place in it.
        const settled = verdict.status !== 'pending_verification';
        changed = { ...current, ...verdict, ...(settled ? { next_check_at: null, check_claimed_until: null } : {}) };
      }
      if (awaitsApiKey(changed)) {
        apiKey = randomBytes(64).toString('hex');
        changed = { ...changed, cname_api_key_hash: hashSecret(apiKey) };
      }
      await trx
        .updateTable('custom_domains')
        .set({
          status: changed.status,
          verification_status: changed.verification_status,
          verification_error: changed.verification_error,
          last_verified_at: changed.last_verified_at,
          cname_api_key_hash: changed.cname_api_key_hash,
          next_check_at: changed.next_check_at,
          check_claimed_until: changed.check_claimed_until,
        })
        .where('id', '=', id)
        .execute();
      return { changed, apiKey };
    }));
    const { changed: updated, apiKey } = outcome ?? { changed: await this.row(this.database.db, tenantId, id) };
    this.tenants.forget();
    if (before.status !== 'ready' && updated.status === 'ready') for (const listener of this.readyListeners) listener(updated.domain);
    const record = this.present(updated, undefined, false);
    return apiKey === undefined ? record : { ...record, cname_api_key: apiKey };
  }

  /**
   * One background re-check of a domain this node claimed. Its outcome is recorded only while the
   * domain is still pending and the claim still this node's: a verify call meanwhile settles it first.
   */
  async recheck(claim: ClaimedCheck, leaseUntil: string): Promise<void> {
    const check = await this.check(claim);
    const at = new Date();
    const verdict = this.verdict({ status: 'pending_verification', created_at: claim.created_at }, check, at);
    const deadline = Date.parse(claim.created_at) + this.settings.verifyWindowMs;
    const next = verdict.status === 'pending_verification'
      ? new Date(Math.min(at.getTime() + this.recheckDelay(claim.check_count + 1), deadline)).toISOString()
      : null;
    const recorded = await this.takenOnRace(claim.id, this.database.db.transaction().execute(async (trx) => {
      const taken = await this.hostnameTaken(trx, claim);
      const result = await trx
        .updateTable('custom_domains')
        .set({
          ...(taken ? TAKEN : verdict),
          next_check_at: taken ? null : next,
          check_count: claim.check_count + 1,
          check_claimed_until: null,
        })
        .where('id', '=', claim.id)
        .where('status', '=', 'pending_verification')
        .where('check_claimed_until', '=', leaseUntil)
        .executeTakeFirst();
      return { status: taken ? TAKEN.status : verdict.status, updated: result.numUpdatedRows > 0n };
    }));
    if (recorded?.status === 'ready' && recorded.updated) {
      this.tenants.forget();
      for (const listener of this.readyListeners) listener(claim.domain);
    }
  }

  /** Whether another tenant's domain of this hostname is ready, so that this one can no longer be. */
  private async hostnameTaken(trx: Tx, row: Pick<Row, 'id' | 'domain'>): Promise<boolean> {
    const ready = await trx
      .selectFrom('custom_domains')
      .select('id')
      .where('domain', '=', row.domain)
      .where('status', '=', 'ready')
      .where('id', '!=', row.id)
      .executeTakeFirst();
    return ready !== undefined;
  }

  /**
   * What `settling` (the transaction recording a check of domain `id`) yields; when another tenant's
   * verification of the same hostname committed first, which the unique index on ready hostnames
   * tells, that transaction is undone, the domain recorded as taken, and undefined yielded.
   */
  private async takenOnRace<T>(id: string, settling: Promise<T>): Promise<T | undefined> {
    try {
      return await settling;
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      await this.database.db
        .updateTable('custom_domains')
        .set({ ...TAKEN, next_check_at: null, check_claimed_until: null })
        .where('id', '=', id)
        .where('status', '!=', 'ready')
        .execute();
      return undefined;
    }
  }

  /** Wait before background check number `checkCount` (0 the first): the initial delay, doubled after each, up to the maximum. */
  private recheckDelay(checkCount: number): number {
    return Math.min(this.settings.recheckInitialMs * 2 ** checkCount, this.settings.recheckMaxMs);
  }

  private check(row: Pick<Row, 'type' | 'domain' | 'verification_record'>): Promise<Check> {
    return row.type === 'svc_managed_certs'
      ? this.verifier.checkCname(row.domain, row.verification_record)
      : this.verifier.checkTxt(row.domain, row.verification_record);
  }

  /**
   * Success makes a domain ready. A failure leaves it pending until its verification window has run
   * out; then, or when it had already failed, it is failed, with the last check's finding.
   */
  private verdict(row: Pick<Row, 'status' | 'created_at'>, check: Check, at: Date): Verdict {
    if (check.ok) {
      return { status: 'ready', verification_status: 'verified', verification_error: null, last_verified_at: seconds(at.toISOString()) };
    }
    const windowMs = this.settings.verifyWindowMs;
    if (row.status === 'failed' || at.getTime() >= Date.parse(row.created_at) + windowMs) {
      return { status: 'failed', verification_status: 'failed', verification_error: `Verification did not succeed within ${describeWindow(windowMs)}: ${check.error}` };
    }
    return { status: 'pending_verification', verification_status: 'pending', verification_error: check.error };
  }

  async getDefault(tenant: Tenant): Promise<CustomDomain | { domain: string }> {
    const db = this.database.db;
    const defaultId = await this.defaultId(db, tenant.id);
    if (defaultId === undefined) return { domain: tenant.domain };
    const row = await db.selectFrom('custom_domains').selectAll().where('id', '=', defaultId).executeTakeFirst();
    return row ? this.present(row, defaultId) : { domain: tenant.domain };
  }

  async setDefault(tenant: Tenant, hostname: string): Promise<CustomDomain | { domain: string }> {
    const domain = hostname.toLowerCase();
    const result = await this.database.db.transaction().execute(async (trx) => {
      if (domain === tenant.domain) {
        await trx.deleteFrom('custom_domain_defaults').where('tenant_id', '=', tenant.id).execute();
        return { domain: tenant.domain };
      }
      const row = await trx
        .selectFrom('custom_domains')
        .selectAll()
        .where('tenant_id', '=', tenant.id)
        .where('domain', '=', domain)
        .$if(this.database.dialect === 'postgres', (q) => q.forUpdate())
        .executeTakeFirst();
      if (!row || row.status !== 'ready') throw mustBeVerified();
      await this.makeDefault(trx, tenant.id, row.id);
      return this.present(row, row.id);
    });
    this.tenants.forget();
    return result;
  }

  /** Host lookup for the tenant service: a ready custom domain reaches its tenant (a self-managed one only with its key). */
  async lookupHost(host: string): Promise<TenantHost | undefined> {
    const found = await this.database.db
      .selectFrom('custom_domains')
      .innerJoin('tenants', 'tenants.id', 'custom_domains.tenant_id')
      // Only self-managed domains read `uploaded`, and the server issues certificates only for svc-managed ones.
      .leftJoin('custom_domain_certificates as certificates', 'certificates.custom_domain_id', 'custom_domains.id')
      .select([
        'tenants.id as id',
        'tenants.domain as tenant_domain',
        'custom_domains.domain as domain',
        'custom_domains.type as type',
        'custom_domains.cname_api_key_hash as cname_api_key_hash',
        'certificates.custom_domain_id as uploaded',
      ])
      .where('custom_domains.domain', '=', host.toLowerCase())
      .where('custom_domains.status', '=', 'ready')
      .executeTakeFirst();
    if (!found) return undefined;
    const tenantHost: TenantHost = { tenant: { id: found.id, domain: found.tenant_domain }, domain: found.domain };
    // The server terminates TLS for svc-managed domains; self-managed ones are reached through the operator's proxy.
    if (found.type !== 'self_managed_certs') return tenantHost;
    return { ...tenantHost, cnameApiKeyHash: found.cname_api_key_hash, uploadedCertificate: found.uploaded !== null };
  }

  /** What choosing an email's domain reads of each of the tenant's custom domains, with which one is the default, in one query. */
  async emailDomains(tenantId: string): Promise<EmailDomain[]> {
    const rows = await this.database.db
      .selectFrom('custom_domains')
      .leftJoin('custom_domain_defaults as defaults', 'defaults.custom_domain_id', 'custom_domains.id')
      .select([
        'custom_domains.domain as domain',
        'custom_domains.status as status',
        'custom_domains.domain_metadata as domain_metadata',
        'defaults.custom_domain_id as default_id',
      ])
      .where('custom_domains.tenant_id', '=', tenantId)
      .orderBy('custom_domains.domain')
      .execute();
    return rows.map((r) => ({
      domain: r.domain,
      status: r.status,
      domain_metadata: r.domain_metadata === null ? {} : (JSON.parse(r.domain_metadata) as Record<string, string>),
      is_default: r.default_id !== null,
    }));
  }

  /** Domains provider for the tenant service: the tenant's ready custom domains. */
  async readyDomains(tenantId: string): Promise<string[]> {
    const rows = await this.database.db
      .selectFrom('custom_domains')
      .select('domain')
      .where('tenant_id', '=', tenantId)
      .where('status', '=', 'ready')
      .orderBy('domain')
      .execute();
    return rows.map((r) => r.domain);
  }
}

function project(record: CustomDomain, fields: string | undefined, include: boolean | undefined): CustomDomain {
  if (fields === undefined || fields.trim() === '') return record;
  const names = new Set(fields.split(',').map((f) => f.trim()));
  const keep = include !== false;
  return Object.fromEntries(Object.entries(record).filter(([key]) => names.has(key) === keep)) as unknown as CustomDomain;
}
