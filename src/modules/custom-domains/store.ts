import type { Selectable } from 'kysely';
import { claimDueRows, type LeasedTable } from '../../db/claim-due.ts';
import type { Database, Tx } from '../../db/database.ts';
import { isUniqueViolation, transaction, uniqueOr } from '../../db/database.ts';
import type { CustomDomainCertificatesTable, CustomDomainsTable } from '../../db/schema.ts';
import { customDomainError } from '../../http/errors.ts';

export type CustomDomainRow = Selectable<CustomDomainsTable>;
export type CustomDomainType = CustomDomainsTable['type'];
export type CustomDomainStatus = CustomDomainsTable['status'];

/** What a background check needs of the domain it claimed. */
export type ClaimedCheck = Pick<
  CustomDomainRow,
  'id' | 'domain' | 'type' | 'verification_record' | 'created_at' | 'check_count'
>;

/** What a DNS check records of a domain: its status and verification members. */
export type CheckOutcome = Pick<CustomDomainRow, 'status' | 'verification_status' | 'verification_error'> & {
  last_verified_at?: string;
};

/** The members of a domain an update may change. */
export type DomainMembers = Pick<
  CustomDomainRow,
  'tls_policy' | 'custom_client_ip_header' | 'relying_party_identifier' | 'domain_metadata'
>;

/** A certificate as stored for a custom domain. */
export type StoredCertificate = Pick<
  CustomDomainCertificatesTable,
  'source' | 'certificate' | 'private_key' | 'fingerprint' | 'not_before' | 'not_after'
>;
export type CertificateValues = Omit<CustomDomainCertificatesTable, 'custom_domain_id'>;

/** What a domain's record shows of its stored certificate: who issued it and until when it is valid. */
export type CertificateDates = Pick<CustomDomainCertificatesTable, 'custom_domain_id' | 'source' | 'not_after'>;

/** A ready custom domain and the certificate stored for it, if any. */
export interface ReadyDomain {
  id: string;
  domain: string;
  type: CustomDomainType;
  certificate: StoredCertificate | undefined;
}

/** A ready custom domain as resolving a Host header sees it. */
export interface ReadyHost {
  tenantId: string;
  domain: string;
  type: CustomDomainType;
  cnameApiKeyHash: string | null;
  /** Whether a certificate is stored for it: for a self-managed domain, the operator uploaded one. */
  hasCertificate: boolean;
}

/** A custom domain as choosing an email's domain reads it. */
export type EmailDomainRow = Pick<CustomDomainRow, 'domain' | 'status' | 'domain_metadata'> & { is_default: boolean };

/** Which of a tenant's domains a list returns: by hostname (exact or prefix), after a cursor, at most `limit`. */
export interface DomainFilter {
  domain?: { value: string; prefix: boolean };
  after?: string;
  limit?: number;
}

/**
 * A write that would make a hostname ready twice: another tenant's domain was verified for it first,
 * as the unique index on ready hostnames tells. The transaction it was thrown in is undone.
 */
export class HostnameTaken extends Error {
  constructor() {
    super('the hostname is ready for another custom domain');
    this.name = 'HostnameTaken';
  }
}

/**
 * Pending domains whose check is due, claimed under a lease so that two nodes never check one domain
 * at the same time; a node that dies mid-check leaves its lease to run out and the domain is claimed again.
 */
export const DUE_CHECKS: LeasedTable<ClaimedCheck> = {
  table: 'custom_domains',
  key: 'id',
  returning: ['id', 'domain', 'type', 'verification_record', 'created_at', 'check_count'],
  pendingStatus: 'pending_verification',
  dueColumn: 'next_check_at',
  leaseColumn: 'check_claimed_until',
};

/** Translates the unique index on ready hostnames into HostnameTaken. */
async function readyOnce<T>(write: Promise<T>): Promise<T> {
  try {
    return await write;
  } catch (error) {
    if (isUniqueViolation(error)) throw new HostnameTaken();
    throw error;
  }
}

/**
 * Every query on `custom_domains`, `custom_domain_defaults` and `custom_domain_certificates`, for
 * both dialects. Reads that run in a transaction take it as `trx`; `lock` takes the rows read for
 * update until it ends (PostgreSQL: SQLite transactions hold the write lock from their start).
 */
export class CustomDomainStore {
  constructor(private readonly database: Database) {}

  transaction<T>(work: (trx: Tx) => Promise<T>): Promise<T> {
    return transaction(this.database, work);
  }

  private get forUpdate(): boolean {
    return this.database.dialect === 'postgres';
  }

  async find(tenantId: string, id: string, trx?: Tx, lock = false): Promise<CustomDomainRow | undefined> {
    return (trx ?? this.database.db)
      .selectFrom('custom_domains')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .$if(lock && this.forUpdate, (q) => q.forUpdate())
      .executeTakeFirst();
  }

  /** The tenant's domain `id`, or the API's 404. */
  async get(tenantId: string, id: string, trx?: Tx, lock = false): Promise<CustomDomainRow> {
    const row = await this.find(tenantId, id, trx, lock);
    if (!row) throw customDomainError.notFound(id);
    return row;
  }

  async findByHostname(trx: Tx, tenantId: string, domain: string, lock = false): Promise<CustomDomainRow | undefined> {
    return trx
      .selectFrom('custom_domains')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('domain', '=', domain)
      .$if(lock && this.forUpdate, (q) => q.forUpdate())
      .executeTakeFirst();
  }

  async byId(id: string): Promise<CustomDomainRow | undefined> {
    return this.database.db.selectFrom('custom_domains').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** The id of the tenant's default custom domain; undefined when the canonical domain is the default. */
  async defaultId(tenantId: string, trx?: Tx, lock = false): Promise<string | undefined> {
    const row = await (trx ?? this.database.db)
      .selectFrom('custom_domain_defaults')
      .select('custom_domain_id')
      .where('tenant_id', '=', tenantId)
      .$if(lock && this.forUpdate, (q) => q.forUpdate())
      .executeTakeFirst();
    return row?.custom_domain_id;
  }

  /** Whether another domain of this hostname (another tenant's) is ready. */
  async readyElsewhere(trx: Tx, row: Pick<CustomDomainRow, 'id' | 'domain'>): Promise<boolean> {
    const ready = await trx
      .selectFrom('custom_domains')
      .select('id')
      .where('domain', '=', row.domain)
      .where('status', '=', 'ready')
      .where('id', '!=', row.id)
      .executeTakeFirst();
    return ready !== undefined;
  }

  /** The tenant's domains, as counting them and finding the primary one needs. */
  async primaryFlags(trx: Tx, tenantId: string): Promise<Array<Pick<CustomDomainRow, 'id' | 'is_primary'>>> {
    return trx.selectFrom('custom_domains').select(['id', 'is_primary']).where('tenant_id', '=', tenantId).execute();
  }

  /** Adds a domain; the tenant already having one of this hostname is a conflict. */
  async insert(trx: Tx, row: CustomDomainRow): Promise<void> {
    await uniqueOr(trx.insertInto('custom_domains').values(row).execute(), customDomainError.alreadyExists);
  }

  async list(tenantId: string, filter: DomainFilter): Promise<CustomDomainRow[]> {
    const { domain, after, limit } = filter;
    return this.database.db
      .selectFrom('custom_domains')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .$if(domain !== undefined, (q) =>
        domain!.prefix ? q.where('domain', 'like', `${domain!.value}%`) : q.where('domain', '=', domain!.value),
      )
      .$if(after !== undefined, (q) => q.where('domain', '>', after!))
      .orderBy('domain')
      .$if(limit !== undefined, (q) => q.limit(limit!))
      .execute();
  }

  async updateMembers(trx: Tx, id: string, members: DomainMembers): Promise<void> {
    await trx.updateTable('custom_domains').set(members).where('id', '=', id).execute();
  }

  async setDefault(trx: Tx, tenantId: string, id: string, at: string): Promise<void> {
    await trx
      .insertInto('custom_domain_defaults')
      .values({ tenant_id: tenantId, custom_domain_id: id, updated_at: at })
      .onConflict((oc) => oc.column('tenant_id').doUpdateSet({ custom_domain_id: id, updated_at: at }))
      .execute();
  }

  /** The canonical domain becomes the default again. */
  async clearDefault(trx: Tx, tenantId: string): Promise<void> {
    await trx.deleteFrom('custom_domain_defaults').where('tenant_id', '=', tenantId).execute();
  }

  async delete(trx: Tx, tenantId: string, id: string): Promise<void> {
    await trx.deleteFrom('custom_domains').where('tenant_id', '=', tenantId).where('id', '=', id).execute();
  }

  /** Records what a verify call found (and the cname-api-key it issued); HostnameTaken when it lost the hostname. */
  async recordVerification(
    trx: Tx,
    id: string,
    values: Pick<
      CustomDomainRow,
      | 'status'
      | 'verification_status'
      | 'verification_error'
      | 'last_verified_at'
      | 'cname_api_key_hash'
      | 'next_check_at'
      | 'check_claimed_until'
    >,
  ): Promise<void> {
    await readyOnce(trx.updateTable('custom_domains').set(values).where('id', '=', id).execute());
  }

  /**
   * Records a background check while the domain is still pending and the claim still `leaseUntil`:
   * whether it did. HostnameTaken when the domain lost its hostname.
   */
  async recordRecheck(
    trx: Tx,
    id: string,
    leaseUntil: string,
    values: CheckOutcome & Pick<CustomDomainRow, 'next_check_at' | 'check_count'>,
  ): Promise<boolean> {
    const result = await readyOnce(
      trx
        .updateTable('custom_domains')
        .set({ ...values, check_claimed_until: null })
        .where('id', '=', id)
        .where('status', '=', 'pending_verification')
        .where('check_claimed_until', '=', leaseUntil)
        .executeTakeFirst(),
    );
    return result.numUpdatedRows > 0n;
  }

  /** Settles a domain that is not ready (yet) with `outcome`, out of the background schedule. */
  async settleUnlessReady(id: string, outcome: CheckOutcome): Promise<void> {
    await this.database.db
      .updateTable('custom_domains')
      .set({ ...outcome, next_check_at: null, check_claimed_until: null })
      .where('id', '=', id)
      .where('status', '!=', 'ready')
      .execute();
  }

  /** Claims up to `limit` due background checks under a lease of `leaseMs` (see DUE_CHECKS). */
  async claimDueChecks(leaseMs: number, limit: number): Promise<Array<ClaimedCheck & { lease: string }>> {
    return claimDueRows(this.database, DUE_CHECKS, { leaseMs }, limit);
  }

  /** The ready domain of this hostname, whichever tenant's it is. */
  async readyHost(host: string): Promise<ReadyHost | undefined> {
    const found = await this.database.db
      .selectFrom('custom_domains')
      .leftJoin('custom_domain_certificates as certificates', 'certificates.custom_domain_id', 'custom_domains.id')
      .select([
        'custom_domains.tenant_id as tenant_id',
        'custom_domains.domain as domain',
        'custom_domains.type as type',
        'custom_domains.cname_api_key_hash as cname_api_key_hash',
        'certificates.custom_domain_id as certificate_of',
      ])
      .where('custom_domains.domain', '=', host)
      .where('custom_domains.status', '=', 'ready')
      .executeTakeFirst();
    return (
      found && {
        tenantId: found.tenant_id,
        domain: found.domain,
        type: found.type,
        cnameApiKeyHash: found.cname_api_key_hash,
        hasCertificate: found.certificate_of !== null,
      }
    );
  }

  /** Hostnames of the tenant's ready domains, in order. */
  async readyHostnames(tenantId: string): Promise<string[]> {
    const rows = await this.database.db
      .selectFrom('custom_domains')
      .select('domain')
      .where('tenant_id', '=', tenantId)
      .where('status', '=', 'ready')
      .orderBy('domain')
      .execute();
    return rows.map((r) => r.domain);
  }

  /** Each of the tenant's domains with which one is the default, in one query. */
  async emailDomains(tenantId: string): Promise<EmailDomainRow[]> {
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
    return rows.map(({ default_id, ...row }) => ({ ...row, is_default: default_id !== null }));
  }

  /** The ready domain of this hostname with its stored certificate, if any. */
  async readyWithCertificate(hostname: string): Promise<ReadyDomain | undefined> {
    const row = await this.database.db
      .selectFrom('custom_domains')
      .leftJoin('custom_domain_certificates', 'custom_domain_certificates.custom_domain_id', 'custom_domains.id')
      .select([
        'custom_domains.id as id',
        'custom_domains.domain as domain',
        'custom_domains.type as type',
        'custom_domain_certificates.source as source',
        'custom_domain_certificates.certificate as certificate',
        'custom_domain_certificates.private_key as private_key',
        'custom_domain_certificates.fingerprint as fingerprint',
        'custom_domain_certificates.not_before as not_before',
        'custom_domain_certificates.not_after as not_after',
      ])
      .where('custom_domains.domain', '=', hostname)
      .where('custom_domains.status', '=', 'ready')
      .executeTakeFirst();
    if (row === undefined) return undefined;
    const { id, domain, type, source, certificate, private_key, fingerprint, not_before, not_after } = row;
    const complete =
      source !== null &&
      certificate !== null &&
      private_key !== null &&
      fingerprint !== null &&
      not_before !== null &&
      not_after !== null;
    const stored = complete ? { source, certificate, private_key, fingerprint, not_before, not_after } : undefined;
    return { id, domain, type, certificate: stored };
  }

  /** The certificate stored for a custom domain, without its key: what describing it shows. */
  async certificateOf(customDomainId: string): Promise<Omit<StoredCertificate, 'private_key'> | undefined> {
    return this.database.db
      .selectFrom('custom_domain_certificates')
      .select(['source', 'certificate', 'fingerprint', 'not_before', 'not_after'])
      .where('custom_domain_id', '=', customDomainId)
      .executeTakeFirst();
  }

  /**
   * The source and validity of the certificates stored for these domains (never a PEM or key), in one
   * statement by primary key; none for no domains.
   */
  async certificateDates(customDomainIds: readonly string[], trx?: Tx): Promise<CertificateDates[]> {
    if (customDomainIds.length === 0) return [];
    return (trx ?? this.database.db)
      .selectFrom('custom_domain_certificates')
      .select(['custom_domain_id', 'source', 'not_after'])
      .where('custom_domain_id', 'in', customDomainIds)
      .execute();
  }

  /** Stores a domain's certificate, replacing any earlier one. */
  async putCertificate(trx: Tx, customDomainId: string, values: CertificateValues): Promise<void> {
    await trx
      .insertInto('custom_domain_certificates')
      .values({ custom_domain_id: customDomainId, ...values })
      .onConflict((oc) => oc.column('custom_domain_id').doUpdateSet(values))
      .execute();
  }

  /**
   * Stores an issued certificate by compare-and-set on the one read before issuing (its fingerprint,
   * or none): a node that lost the race stores nothing.
   */
  async storeIssuedCertificate(
    customDomainId: string,
    replaced: string | undefined,
    values: CertificateValues,
  ): Promise<void> {
    if (replaced === undefined) {
      await this.database.db
        .insertInto('custom_domain_certificates')
        .values({ custom_domain_id: customDomainId, ...values })
        .onConflict((oc) => oc.column('custom_domain_id').doNothing())
        .execute();
    } else {
      await this.database.db
        .updateTable('custom_domain_certificates')
        .set(values)
        .where('custom_domain_id', '=', customDomainId)
        .where('fingerprint', '=', replaced)
        .execute();
    }
  }
}
