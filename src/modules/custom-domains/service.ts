import { randomUUID } from 'node:crypto';
import { now } from '../../db/database.ts';
import { decodeCursor, encodeCursor } from '../../http/cursor.ts';
import { badRequest, customDomainError, type ApiError } from '../../http/errors.ts';
import { newId } from '../../ids.ts';
import type { Tenant, TenantService } from '../tenants/service.ts';
import { DefaultDomain, type DefaultDomainRecord } from './default-domain.ts';
import type { DnsCheck } from './dns-check.ts';
import { CustomDomainRecords, project, type CustomDomain } from './record.ts';
import type {
  CreateCustomDomainBody,
  CustomDomainTest,
  ListCustomDomainsQuery,
  UpdateCustomDomainBody,
  VerifiedCustomDomain,
} from './schema.ts';
import type {
  ClaimedCheck,
  CustomDomainRow,
  CustomDomainStatus,
  CustomDomainStore,
  CustomDomainType,
} from './store.ts';
import { DomainVerification, firstCheckAt, type VerificationSchedule } from './verification.ts';

export type { CustomDomain } from './record.ts';
export type { CustomDomainType } from './store.ts';

/** A custom domain as choosing an email's domain sees it. */
export interface EmailDomain {
  domain: string;
  status: CustomDomainStatus;
  domain_metadata: Record<string, string>;
  is_default: boolean;
}

export interface CustomDomainSettings extends VerificationSchedule {
  edgeDomain: string;
  maxPerTenant: number;
  /** The name of the source issuing svc-managed domains' certificates (CUSTOM_DOMAIN_CERT_SOURCE), if any. */
  certificateSource?: string;
}

/** What custom domains ask of tenants: canonical domains are not to be claimed, and caches to drop after a change. */
export type TenantsOfCustomDomains = Pick<TenantService, 'byDomain' | 'lock' | 'forget'>;

/** Who else acts when a custom domain changes, wired where the services are built. */
export interface CustomDomainListeners {
  /** A domain became ready (by a verify call or a background check): told its hostname. */
  becameReady(hostname: string): void;
}

const DEFAULT_TAKE = 50;
const MAX_METADATA_KEYS = 10;

/** relying_party_identifier must be the domain or a suffix of it with at least two labels (no public suffix list). */
export function checkRelyingParty(domain: string, rpi: string | null | undefined): void {
  if (rpi === undefined || rpi === null) return;
  const id = rpi.toLowerCase();
  if (id === domain || (id.includes('.') && domain.endsWith(`.${id}`))) return;
  throw customDomainError.relyingPartyIdentifier();
}

/** tls_policy belongs to svc-managed domains, custom_client_ip_header to self-managed ones. */
export function checkTypeMembers(
  type: CustomDomainType,
  input: { tls_policy?: string; custom_client_ip_header?: string | null },
): void {
  if (type === 'self_managed_certs' && input.tls_policy !== undefined) throw customDomainError.tlsPolicyOnSelfManaged();
  if (type === 'svc_managed_certs' && input.custom_client_ip_header !== undefined) {
    throw customDomainError.clientIpHeaderOnSvcManaged();
  }
}

function tooManyMetadataKeys(count: number): ApiError {
  return badRequest.tooManyProperties(count, 10, 'domain_metadata');
}

/** `domain:<value>` or `domain:<prefix>*`, the only queries `q` takes. */
export function parseDomainQuery(q: string): { value: string; prefix: boolean } {
  // Hostname characters only, so the value never carries LIKE wildcards of its own.
  const match = /^domain:"?([A-Za-z0-9.-]*)(\*)?"?$/.exec(q.trim());
  if (!match) throw customDomainError.unsupportedQuery();
  return { value: (match[1] ?? '').toLowerCase(), prefix: match[2] !== undefined };
}

/** Stored metadata with an update's keys merged in (null deletes a key), as stored: JSON text. */
export function mergeMetadata(stored: string | null, update: Record<string, string | null>): string {
  const merged: Record<string, string> = stored === null ? {} : JSON.parse(stored);
  for (const [key, value] of Object.entries(update)) {
    if (value === null) delete merged[key];
    else merged[key] = value;
  }
  const count = Object.keys(merged).length;
  if (count > MAX_METADATA_KEYS) throw tooManyMetadataKeys(count);
  return JSON.stringify(merged);
}

/**
 * The custom domains API: adding, reading, updating and deleting a tenant's domains here; verifying
 * them (verification.ts) and choosing the default domain (default-domain.ts) through this service too.
 * Every change is followed by `changed`, the one place that tells tenants and listeners.
 */
export class CustomDomainService {
  private readonly verification: DomainVerification;
  private readonly defaults: DefaultDomain;
  private readonly records: CustomDomainRecords;

  constructor(
    private readonly store: CustomDomainStore,
    private readonly tenants: TenantsOfCustomDomains,
    dns: DnsCheck,
    private readonly settings: CustomDomainSettings,
    private readonly listeners: CustomDomainListeners,
  ) {
    this.records = new CustomDomainRecords(store, settings.certificateSource);
    this.verification = new DomainVerification(store, dns, settings, this.records);
    this.defaults = new DefaultDomain(store, this.records);
  }

  /** CNAME target of an svc-managed domain: `<tenant>-cd-<id without cd_, lower-cased>.<edge domain>`. */
  cnameTarget(tenantId: string, id: string): string {
    return `${tenantId}-cd-${id.slice(3).toLowerCase()}.${this.settings.edgeDomain}`;
  }

  async create(tenantId: string, input: CreateCustomDomainBody): Promise<CustomDomain> {
    const type: CustomDomainType = input.type === 'self_managed_certs' ? 'self_managed_certs' : 'svc_managed_certs';
    const domain = input.domain.toLowerCase();
    checkTypeMembers(type, input);
    checkRelyingParty(domain, input.relying_party_identifier);
    const metadata =
      input.domain_metadata === undefined
        ? null
        : Object.fromEntries(Object.entries(input.domain_metadata).filter(([, v]) => v !== null));
    const id = newId.customDomain();
    const createdAt = now();
    const row = await this.store.transaction(async (trx) => {
      // Creations of one tenant run one after another, so the per-tenant cap holds under concurrency.
      await this.tenants.lock(trx, tenantId);
      // A tenant's canonical domain cannot be claimed as a custom domain, nor a hostname verified for
      // another tenant; one merely pending elsewhere can: the first to verify it owns it. The same
      // tenant adding a hostname twice meets the unique index on (tenant, hostname).
      if (await this.tenants.byDomain(domain, trx)) throw customDomainError.alreadyExists();
      if (await this.store.readyElsewhere(trx, { id, domain })) throw customDomainError.alreadyExists();
      const existing = await this.store.primaryFlags(trx, tenantId);
      if (existing.length >= this.settings.maxPerTenant) throw customDomainError.tooMany();
      const row: CustomDomainRow = {
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
        next_check_at: firstCheckAt(createdAt, this.settings),
        check_count: 0,
        check_claimed_until: null,
      };
      await this.store.insert(trx, row);
      return row;
    });
    this.changed();
    // Fresh: no check yet, so no certificate member and nothing to read for one.
    return this.records.one(row, undefined);
  }

  async get(tenantId: string, id: string): Promise<CustomDomain> {
    const row = await this.store.get(tenantId, id);
    return this.records.one(row, await this.store.defaultId(tenantId));
  }

  async list(
    tenantId: string,
    query: ListCustomDomainsQuery,
  ): Promise<CustomDomain[] | { custom_domains: CustomDomain[]; next?: string }> {
    const domain = query.q !== undefined && query.q.trim() !== '' ? parseDomainQuery(query.q) : undefined;
    const paged = query.take !== undefined || query.from !== undefined;
    const take = query.take ?? DEFAULT_TAKE;
    const after = query.from === undefined ? undefined : decodeCursor(query.from, () => true);
    const rows = await this.store.list(tenantId, { domain, after, limit: paged ? take + 1 : undefined });
    const defaultId = await this.store.defaultId(tenantId);
    const page = paged ? rows.slice(0, take) : rows;
    const records = await this.records.all(page, defaultId);
    const items = records.map((r) => project(r, query.fields, query.include_fields));
    if (!paged) return items;
    const last = page[page.length - 1];
    return { custom_domains: items, ...(rows.length > take && last ? { next: encodeCursor(last.domain) } : {}) };
  }

  async update(tenantId: string, id: string, input: UpdateCustomDomainBody): Promise<CustomDomain> {
    const result = await this.store.transaction(async (trx) => {
      const current = await this.store.get(tenantId, id, trx, true);
      checkTypeMembers(current.type, input);
      checkRelyingParty(current.domain, input.relying_party_identifier);
      const changed: CustomDomainRow = {
        ...current,
        ...(input.tls_policy === undefined ? {} : { tls_policy: input.tls_policy }),
        ...(input.custom_client_ip_header === undefined
          ? {}
          : { custom_client_ip_header: input.custom_client_ip_header }),
        ...(input.relying_party_identifier === undefined
          ? {}
          : { relying_party_identifier: input.relying_party_identifier?.toLowerCase() ?? null }),
        domain_metadata:
          input.domain_metadata === undefined
            ? current.domain_metadata
            : mergeMetadata(current.domain_metadata, input.domain_metadata),
      };
      await this.store.updateMembers(trx, id, {
        tls_policy: changed.tls_policy,
        custom_client_ip_header: changed.custom_client_ip_header,
        relying_party_identifier: changed.relying_party_identifier,
        domain_metadata: changed.domain_metadata,
      });
      return this.records.one(changed, await this.defaults.apply(trx, current, input.is_default), { trx });
    });
    this.changed();
    return result;
  }

  async delete(tenantId: string, id: string): Promise<void> {
    await this.store.transaction(async (trx) => {
      // The domain's row is locked first, as making a domain the default locks it (DefaultDomain.set,
      // apply through update) before it writes the defaults row: the two wait for each other in one
      // order. Taking the defaults row first deadlocked against them; and where the canonical domain was
      // the default there was no defaults row to lock, so a "set default" of this domain committed
      // between the check and the delete, and the default was deleted. Once this lock is held, the
      // defaults row read next (locked, at the latest commit) says whether this domain is the default.
      await this.store.get(tenantId, id, trx, true);
      const defaultId = await this.store.defaultId(tenantId, trx, true);
      if (defaultId === id) throw customDomainError.deletingDefault();
      await this.store.delete(trx, tenantId, id);
    });
    this.changed();
  }

  /** Checks the domain's DNS record now (see verification.ts). */
  async verify(tenantId: string, id: string): Promise<VerifiedCustomDomain> {
    const { record, becameReady } = await this.verification.verify(tenantId, id);
    this.changed(becameReady);
    return record;
  }

  /** Checks a ready domain's DNS record again, changing nothing (see verification.ts). */
  test(tenantId: string, id: string): Promise<CustomDomainTest> {
    return this.verification.test(tenantId, id);
  }

  /**
   * Makes a pending domain ready as if its DNS record had been found: for seed files, whose domains
   * (`acme.localhost`) have no DNS to check. The same transaction and rules as verify otherwise.
   */
  async verifyWithoutDns(tenantId: string, id: string): Promise<VerifiedCustomDomain> {
    const { record, becameReady } = await this.verification.verify(tenantId, id, { ok: true });
    this.changed(becameReady);
    return record;
  }

  /** One background re-check of a domain this node claimed (see rechecks.ts). */
  /** Re-checks a claimed domain; returns its status after the check. */
  async recheck(claim: ClaimedCheck, leaseUntil: string): Promise<CustomDomainStatus> {
    const { status, becameReady } = await this.verification.recheck(claim, leaseUntil);
    if (becameReady) this.changed(claim.domain);
    return status;
  }

  async getDefault(tenant: Tenant): Promise<DefaultDomainRecord> {
    return this.defaults.get(tenant);
  }

  async setDefault(tenant: Tenant, hostname: string): Promise<DefaultDomainRecord> {
    const result = await this.defaults.set(tenant, hostname);
    this.changed();
    return result;
  }

  /** What choosing an email's domain reads of each of the tenant's custom domains, with which one is the default. */
  async emailDomains(tenantId: string): Promise<EmailDomain[]> {
    const rows = await this.store.emailDomains(tenantId);
    return rows.map((r) => ({
      domain: r.domain,
      status: r.status,
      domain_metadata: r.domain_metadata === null ? {} : (JSON.parse(r.domain_metadata) as Record<string, string>),
      is_default: r.is_default,
    }));
  }

  /**
   * After every committed change: tenants drop the hosts and token domains they cached, and a domain
   * that became ready (`becameReady`, its hostname) is announced.
   */
  private changed(becameReady?: string): void {
    this.tenants.forget();
    if (becameReady !== undefined) this.listeners.becameReady(becameReady);
  }
}
