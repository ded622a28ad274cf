import { txtRecordName } from './dns-check.ts';
import type { CustomDomainRow, CustomDomainStatus, CustomDomainType } from './store.ts';

/** A custom domain as the API shows it. */
export interface CustomDomain {
  custom_domain_id: string;
  domain: string;
  primary: boolean;
  is_default?: boolean;
  status: CustomDomainStatus;
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

/**
 * A stored domain as the API shows it; `is_default` compares it with the tenant's default
 * (`defaultId`), and is left out with `withDefault` false (the verify response has none).
 */
export function present(row: CustomDomainRow, defaultId: string | undefined, withDefault = true): CustomDomain {
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
    created_at: row.created_at,
    ...(row.relying_party_identifier === null ? {} : { relying_party_identifier: row.relying_party_identifier }),
  };
}

/** The record with only the members `fields` names (`include` true or absent), or without them (false). */
export function project(record: CustomDomain, fields: string | undefined, include: boolean | undefined): CustomDomain {
  if (fields === undefined || fields.trim() === '') return record;
  const names = new Set(fields.split(',').map((f) => f.trim()));
  const keep = include !== false;
  const kept = Object.entries(record).filter(([key]) => names.has(key) === keep);
  return Object.fromEntries(kept) as unknown as CustomDomain;
}
