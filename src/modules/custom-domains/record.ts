import { txtRecordName } from './dns-check.ts';
import type { CustomDomainRecord, DomainCertificate } from './schema.ts';
import type { CertificateDates, CustomDomainRow, CustomDomainStore } from './store.ts';
import type { Tx } from '../../db/database.ts';

/** A custom domain as the API shows it (schema.ts, CustomDomainRecord). */
export type CustomDomain = CustomDomainRecord;

/** Nested timestamps of the original carry no milliseconds (`2026-03-12T09:23:36Z`). */
export const seconds = (iso: string): string => iso.replace(/\.\d{3}Z$/, 'Z');

/**
 * Whether a domain's record shows the state of a stored certificate, so that it has to be read: a
 * ready svc-managed domain on a server with a certificate source (`source`, its name).
 */
export const showsCertificateState = (
  row: Pick<CustomDomainRow, 'type' | 'status'>,
  source: string | undefined,
): boolean => source !== undefined && row.type === 'svc_managed_certs' && row.status === 'ready';

/**
 * The record's `certificate` member (compat notes §5.3), from what Tenantry knows: none for a
 * self-managed domain, nor for an svc-managed one before its first check; `{}` while it is not ready
 * (the original shows only its certificate authority then, which Tenantry leaves out) or when the
 * server has no certificate source (`source` undefined: the default certificate is served);
 * `provisioned` while a certificate of the configured source is stored and unexpired, with
 * `renews_before` its expiry (the SNI lookup renews it before then, replaces it once expired);
 * `provisioning` while the ready domain has none (it is issued in the background, or by the first
 * handshake, which waits for it) or only one of another source or an expired one.
 */
export function certificateMember(
  row: Pick<CustomDomainRow, 'type' | 'status' | 'verification_status'>,
  source: string | undefined,
  stored: Pick<CertificateDates, 'source' | 'not_after'> | undefined,
  at: number,
): DomainCertificate | undefined {
  if (row.type !== 'svc_managed_certs' || row.verification_status === null) return undefined;
  if (!showsCertificateState(row, source)) return {};
  if (stored === undefined || stored.source !== source || Date.parse(stored.not_after) <= at) {
    return { status: 'provisioning' };
  }
  return { renews_before: seconds(stored.not_after), status: 'provisioned' };
}

/**
 * A stored domain as the API shows it; `is_default` compares it with the tenant's default
 * (`defaultId`), and is left out with `withDefault` false (the verify response has none).
 * `certificate` is its certificate member (certificateMember), undefined for none.
 */
export function present(
  row: CustomDomainRow,
  defaultId: string | undefined,
  certificate: DomainCertificate | undefined,
  withDefault = true,
): CustomDomain {
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
    ...(row.domain_metadata === null
      ? {}
      : { domain_metadata: JSON.parse(row.domain_metadata) as Record<string, string> }),
    ...(certificate === undefined ? {} : { certificate }),
    created_at: row.created_at,
    ...(row.relying_party_identifier === null ? {} : { relying_party_identifier: row.relying_party_identifier }),
  };
}

/**
 * Presents stored domains with their certificate members: the certificates of those that show one
 * (showsCertificateState) read in one statement, whatever the number of domains, and none read when
 * no domain shows one. `source` is the name of the server's certificate source, if it has one.
 */
export class CustomDomainRecords {
  constructor(
    private readonly store: Pick<CustomDomainStore, 'certificateDates'>,
    private readonly source: string | undefined,
  ) {}

  async all(
    rows: readonly CustomDomainRow[],
    defaultId: string | undefined,
    options: { withDefault?: boolean; trx?: Tx } = {},
  ): Promise<CustomDomain[]> {
    const ids = rows.filter((r) => showsCertificateState(r, this.source)).map((r) => r.id);
    const stored = new Map((await this.store.certificateDates(ids, options.trx)).map((c) => [c.custom_domain_id, c]));
    const at = Date.now();
    return rows.map((row) =>
      present(row, defaultId, certificateMember(row, this.source, stored.get(row.id), at), options.withDefault ?? true),
    );
  }

  async one(
    row: CustomDomainRow,
    defaultId: string | undefined,
    options: { withDefault?: boolean; trx?: Tx } = {},
  ): Promise<CustomDomain> {
    const [record] = await this.all([row], defaultId, options);
    return record!;
  }
}

/** The record with only the members `fields` names (`include` true or absent), or without them (false). */
export function project(record: CustomDomain, fields: string | undefined, include: boolean | undefined): CustomDomain {
  if (fields === undefined || fields.trim() === '') return record;
  const names = new Set(fields.split(',').map((f) => f.trim()));
  const keep = include !== false;
  const kept = Object.entries(record).filter(([key]) => names.has(key) === keep);
  return Object.fromEntries(kept) as unknown as CustomDomain;
}
