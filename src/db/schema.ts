/**
 * Row types of every table, declared once; Kysely derives query types from them.
 * Timestamps are ISO-8601 UTC strings and JSON members are text, so one code path runs unchanged
 * on SQLite and PostgreSQL (ISO strings sort in time order in both).
 */
export interface TenantsTable {
  id: string;
  domain: string;
  created_at: string;
}

export interface SigningKeysTable {
  kid: string;
  tenant_id: string;
  /** PKCS#8 PEM sealed with the SecretBox. */
  private_key: string;
  public_jwk: string;
  /** 'current' signs new tokens; 'previous' still verifies them; 'revoked' is gone from JWKS. */
  status: 'current' | 'previous' | 'revoked';
  created_at: string;
}

export interface ClientsTable {
  client_id: string;
  tenant_id: string;
  name: string;
  /** SHA-256 of the secret: secrets are 384-bit random, so a slow password hash adds nothing. */
  secret_hash: string;
  /** JSON array of the scopes granted for the tenant's Management API audience. */
  scopes: string;
  created_at: string;
}

export interface ConnectionsTable {
  id: string;
  tenant_id: string;
  name: string;
  strategy: string;
  created_at: string;
}

export interface UsersTable {
  tenant_id: string;
  user_id: string;
  connection: string;
  email: string | null;
  /** The user object as the API returns it, without identity-provider tokens. */
  document: string;
  /** JSON array, one entry per identity, of {access_token, access_token_secret, refresh_token}; null when none. */
  idp_tokens: string | null;
  password_hash: string | null;
  created_at: string;
  updated_at: string;
}

export interface CaptchaSettingsTable {
  tenant_id: string;
  active_provider_id: string;
  updated_at: string;
}

export interface CaptchaProvidersTable {
  tenant_id: string;
  provider: string;
  /** JSON object of the members the API returns for this provider. */
  settings: string;
  /** The provider's `secret` or `api_key`, sealed with the SecretBox; null for providers without one. */
  secret: string | null;
  updated_at: string;
}

export interface SegmentsTable {
  tenant_id: string;
  id: string;
  name: string;
  description: string | null;
  /** 'self' for segments made through the API; 'svc' for those the service provides. */
  type: 'svc' | 'self';
  /** JSON array of the rules, exactly as the client sent them. */
  rules: string;
  created_at: string;
  updated_at: string;
}

export interface CustomDomainsTable {
  id: string;
  tenant_id: string;
  /** Lower-cased hostname: unique per tenant, and among ready domains (the first to verify it owns it). */
  domain: string;
  type: 'svc_managed_certs' | 'self_managed_certs';
  status: 'pending_verification' | 'ready' | 'failed';
  /** 1 or 0: the original's legacy `primary` flag. */
  is_primary: number;
  /** CNAME target (svc-managed) or TXT token (self-managed). */
  verification_record: string;
  verification_status: string | null;
  verification_error: string | null;
  last_verified_at: string | null;
  custom_client_ip_header: string | null;
  tls_policy: string | null;
  /** JSON object, or null when never set. */
  domain_metadata: string | null;
  relying_party_identifier: string | null;
  /** SHA-256 (hex) of the self-managed domain's cname-api-key. */
  cname_api_key_hash: string | null;
  created_at: string;
  /** When the next background DNS check is due; null unless pending_verification. */
  next_check_at: string | null;
  /** Background checks made so far: the next delay doubles with each. */
  check_count: number;
  /** Lease of the node running a background check. */
  check_claimed_until: string | null;
}

/** The certificate a custom domain is served with over HTTPS: issued (svc-managed) or uploaded (self-managed). */
export interface CustomDomainCertificatesTable {
  custom_domain_id: string;
  /** Who provided it: the certificate source that issued it ('dev-ca'), or 'upload'. */
  source: string;
  /** PEM chain, leaf first. */
  certificate: string;
  /** PKCS#8 PEM sealed with the SecretBox. */
  private_key: string;
  /** SHA-256 of the leaf (as X509Certificate.fingerprint256): nodes notice a replaced certificate by it. */
  fingerprint: string;
  not_before: string;
  not_after: string;
  updated_at: string;
}

export interface CustomDomainDefaultsTable {
  tenant_id: string;
  custom_domain_id: string;
  updated_at: string;
}

export interface EventStreamsTable {
  id: string;
  tenant_id: string;
  /** Null when unnamed, and once the stream is being deleted (its name is free for a new stream at once). */
  name: string | null;
  /** 'deleting': deleted through the API, its rows being removed in the background; no read shows it. */
  status: 'enabled' | 'disabled' | 'deleting';
  /** JSON array of {event_type}. */
  subscriptions: string;
  /** JSON of the destination as the API returns it: without token, password or header_value. */
  destination: string;
  /** The webhook's write-only secret (token, password or header_value), sealed with the SecretBox. */
  secret: string | null;
  /** Standard Webhooks signing secrets: a JSON list (newest first) sealed with the SecretBox; null when unsigned. */
  signing_secrets: string | null;
  created_at: string;
  updated_at: string;
  /** Failed delivery attempts since the last one that succeeded (or since the stream was enabled). */
  consecutive_failures: number;
  /** While in the future the stream's circuit is open: none of its deliveries is claimed. */
  circuit_open_until: string | null;
  /** Why the server disabled the stream; null when it is enabled or was disabled through the API. */
  status_reason: string | null;
  /** While deleting: when the next run of its removal is due (a failed one is retried later). */
  deletion_next_at: string | null;
  /** While deleting: a node's lease on the removal; once it runs out (the node died) another takes it over. */
  deletion_claimed_until: string | null;
}

/** The outbox: one row per event, written in the transaction of the change it reports. */
export interface EventsTable {
  id: string;
  tenant_id: string;
  type: string;
  time: string;
  source: string;
  /** JSON of the envelope's `data`. */
  data: string;
  /** 'test' for test events; null otherwise. */
  purpose: string | null;
}

/**
 * A redelivery too large for one chunk, being queued in the background (migration 023): the request's
 * filter, and how far its walk of the stream's failed deliveries (in event id order) has got.
 */
export interface EventStreamRedeliveriesTable {
  id: string;
  stream_id: string;
  tenant_id: string;
  /** JSON array of the event types the request named; null for every type. */
  event_types: string | null;
  /** Events at or after this time (ISO), or null. */
  time_from: string | null;
  /** Events before this time (ISO), or null. */
  time_to: string | null;
  /** The last event id walked: the next chunk starts after it. */
  after_event_id: string;
  /**
   * Where this row's walk ends: the last of the stream's failed deliveries when the redelivery was asked
   * for, or where the next lane begins.
   */
  until_event_id: string;
  /**
   * The request's redelivery, shared by its lanes (migration 024); null in a row recorded before lanes,
   * a redelivery of its own.
   */
  redelivery_id: string | null;
  /**
   * The lanes this row is yet to be cut into, where each holds as many failed deliveries (migration
   * 025): the first node to claim it cuts it. Null: walked as it is.
   */
  lanes: number | null;
  /** Deliveries queued again so far. */
  queued: number;
  /** Always 'pending': the row goes when its walk ends. */
  status: 'pending';
  /** When its next run is due (a failed one is retried later). */
  next_attempt_at: string;
  /** A node's lease on it; once it runs out (the node died) another takes it over. */
  claimed_until: string | null;
  created_at: string;
}

export interface DeliveriesTable {
  stream_id: string;
  event_id: string;
  event_type: string;
  event_time: string;
  status: 'pending' | 'delivered' | 'failed';
  /** Attempts in the current cycle (reset by a redelivery); picks the retry delay. */
  attempt_count: number;
  /** Attempt rows written so far; the next one's seq is this plus one. */
  attempt_seq: number;
  next_attempt_at: string;
  /** A worker's lease: until then no other worker claims it; an expired lease is claimed again. */
  claimed_until: string | null;
  updated_at: string;
}

export interface DeliveryAttemptsTable {
  stream_id: string;
  event_id: string;
  seq: number;
  status: 'failed' | 'retrying' | 'delivered';
  timestamp: string;
  error_message: string | null;
  /** Milliseconds. */
  duration: number | null;
}

/** A stream's finished attempts in one minute (`YYYY-MM-DDTHH:MM`), written with them: what stats read. */
export interface DeliveryCountsTable {
  stream_id: string;
  minute: string;
  delivered: number;
  failed: number;
}

/** A tenant's own version of an email template; without a row the built-in default applies. */
export interface EmailTemplatesTable {
  tenant_id: string;
  /** The original's template name, e.g. `verify_email`. */
  template: string;
  /** Liquid source of the HTML body. */
  body: string;
  /** Liquid source of the From header; null: MAIL_FROM or no-reply@<domain>. */
  sender: string | null;
  /** Liquid source of the subject. */
  subject: string;
  syntax: 'liquid';
  result_url: string | null;
  url_lifetime_seconds: number | null;
  /** 1 or 0. */
  include_email_in_redirect: number;
  /** 1 or 0. */
  enabled: number;
  updated_at: string;
}

/** The mail outbox: one row per email, written in the transaction of the change that sends it. */
export interface EmailOutboxTable {
  id: string;
  tenant_id: string;
  template: string;
  recipient: string;
  sender: string;
  subject: string;
  /** The rendered HTML, sealed with the SecretBox (it holds a verification link); null once sent. */
  body: string | null;
  status: 'pending' | 'sent' | 'failed';
  attempt_count: number;
  next_attempt_at: string;
  /** A worker's lease: until then no other worker claims it; an expired lease is claimed again. */
  claimed_until: string | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
  sent_at: string | null;
}

/** Jobs of the original's /jobs API; a verification-email job's status follows its email. */
export interface JobsTable {
  id: string;
  tenant_id: string;
  type: 'verification_email';
  email_id: string;
  created_at: string;
}

/**
 * Users-import jobs (POST /jobs/users-imports). `status` is pending until the job ends; the API says
 * processing once `started_at` is set. The counters and the resume point move in each batch's transaction.
 */
export interface UsersImportsTable {
  id: string;
  tenant_id: string;
  connection_id: string;
  /** The connection's name, which imported users get. */
  connection: string;
  upsert: number;
  external_id: string | null;
  send_completion_email: number;
  format: 'json' | 'ndjson';
  file_bytes: number;
  /** Records in the file, counted when it was uploaded. */
  total: number;
  status: 'pending' | 'completed' | 'failed';
  status_details: string | null;
  next_attempt_at: string;
  /** A worker's lease: until then no other worker claims it; an expired lease is claimed again. */
  claimed_until: string | null;
  /** How many times a worker claimed it: a job that keeps stopping short is failed, not retried forever. */
  claims: number;
  started_at: string | null;
  /** Byte offset and record position just past the last record a committed batch handled. */
  resume_offset: number;
  resume_position: number;
  done: number;
  inserted: number;
  updated: number;
  failed: number;
  created_at: string;
  updated_at: string;
}

/** An uploaded users file, in chunks of up to 1 MiB, until its job ends. */
export interface UsersImportChunksTable {
  job_id: string;
  seq: number;
  data: Buffer;
  created_at: string;
}

/** A record a users-import job could not import: the record as given (without its password hash) and why. */
export interface UsersImportErrorsTable {
  job_id: string;
  position: number;
  /** JSON of the record. */
  record: string;
  /** JSON array of `{ code, message, path }`. */
  errors: string;
}

/** Email-verification tickets: only the SHA-256 of the ticket in the link is stored. */
export interface EmailVerificationTicketsTable {
  ticket_hash: string;
  tenant_id: string;
  user_id: string;
  /** The address the ticket verifies: it no longer applies once the user's email changes. */
  email: string;
  result_url: string | null;
  /** 1 or 0. */
  include_email_in_redirect: number;
  expires_at: string;
  used_at: string | null;
  created_at: string;
}

export interface Schema {
  tenants: TenantsTable;
  signing_keys: SigningKeysTable;
  clients: ClientsTable;
  connections: ConnectionsTable;
  users: UsersTable;
  segments: SegmentsTable;
  captcha_settings: CaptchaSettingsTable;
  captcha_providers: CaptchaProvidersTable;
  event_streams: EventStreamsTable;
  events: EventsTable;
  deliveries: DeliveriesTable;
  delivery_attempts: DeliveryAttemptsTable;
  delivery_counts: DeliveryCountsTable;
  event_stream_redeliveries: EventStreamRedeliveriesTable;
  custom_domains: CustomDomainsTable;
  custom_domain_defaults: CustomDomainDefaultsTable;
  email_templates: EmailTemplatesTable;
  email_outbox: EmailOutboxTable;
  jobs: JobsTable;
  users_imports: UsersImportsTable;
  users_import_chunks: UsersImportChunksTable;
  users_import_errors: UsersImportErrorsTable;
  email_verification_tickets: EmailVerificationTicketsTable;
  custom_domain_certificates: CustomDomainCertificatesTable;
}
