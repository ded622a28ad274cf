/**
 * The members of an svc-managed custom domain's record in the original's wire order (compat notes
 * §5.3), with every optional one it can carry: `is_default` (not in a verify response), `domain_metadata`
 * and `relying_party_identifier` (when set), `certificate` (once checks began). Tests leave out what a
 * record lacks.
 */
export const SVC_RECORD_KEYS: readonly string[] = [
  'custom_domain_id',
  'domain',
  'primary',
  'is_default',
  'status',
  'type',
  'verification',
  'tls_policy',
  'domain_metadata',
  'certificate',
  'created_at',
  'relying_party_identifier',
];

/** SVC_RECORD_KEYS without `left`. */
export const svcRecordKeysWithout = (...left: string[]): string[] => SVC_RECORD_KEYS.filter((k) => !left.includes(k));
