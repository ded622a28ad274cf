/**
 * Every scope of the Management API (spec section 5), written as the spec's table: resources and the
 * actions each takes. The bootstrap admin client is granted all of them.
 */
const actionsByResource: ReadonlyArray<readonly [string, readonly string[]]> = [
  [
    'crud',
    [
      'actions',
      'authentication_methods',
      'client_credentials',
      'client_grants',
      'clients',
      'connection_profiles',
      'connections',
      'custom_domains',
      'custom_signing_keys',
      'directory_provisionings',
      'email_provider',
      'encryption_keys',
      'event_streams',
      'experimentation',
      'flows',
      'flows_vault_connections',
      'forms',
      'hooks',
      'log_streams',
      'network_acls',
      'organization_connections',
      'organization_discovery_domains',
      'organizations',
      'phone_providers',
      'phone_templates',
      'rate_limit_policies',
      'resource_servers',
      'roles',
      'rules',
      'scim_config',
      'self_service_profiles',
      'token_exchange_profiles',
      'user_attribute_profiles',
      'users',
      'vdcs_templates',
    ],
  ],
  ['rud', ['branding', 'refresh_tokens', 'rules_configs', 'sessions']],
  [
    'ru',
    [
      'client_keys',
      'attack_protection',
      'event_deliveries',
      'guardian_factors',
      'mfa_policies',
      'prompts',
      'self_service_profile_custom_texts',
      'tenant_settings',
    ],
  ],
  ['cru', ['connections_keys', 'email_templates', 'signing_keys']],
  [
    'crd',
    [
      'group_roles',
      'organization_client_grants',
      'organization_group_roles',
      'organization_invitations',
      'organization_member_roles',
      'organization_members',
      'role_members',
      'scim_token',
    ],
  ],
  [
    'rd',
    [
      'anomaly_blocks',
      'current_user',
      'device_credentials',
      'federated_connections_tokens',
      'flows_executions',
      'grants',
      'groups',
      'guardian_enrollments',
    ],
  ],
  ['cd', ['current_user_device_credentials', 'sso_access_tickets']],
  ['c', ['guardian_enrollment_tickets', 'user_tickets']],
  [
    'u',
    ['current_user_identities', 'current_user_metadata', 'client_token_vault_privileged_access', 'users_app_metadata'],
  ],
  [
    'r',
    [
      'client_summary',
      'events',
      'group_members',
      'logs',
      'logs_users',
      'organization_groups',
      'organization_member_effective_roles',
      'organization_member_role_source_groups',
      'organizations_summary',
      'stats',
      'user_effective_permissions',
      'user_effective_roles',
      'user_idp_tokens',
      'user_permission_source_roles',
      'user_role_source_groups',
    ],
  ],
].map(([letters, resources]) => [letters as string, resources as string[]] as const);

const actionNames: Record<string, string> = { c: 'create', r: 'read', u: 'update', d: 'delete' };

/** Scopes of Tenantry's own operations, which the spec has no scope for. */
const EXTENSION_SCOPES: readonly string[] = [
  // GET /api/v2/emails/outbox: the emails the server sent or is sending for the tenant (never their bodies).
  'read:email_outbox',
  // GET /api/v2/emails/outbox/{id}/message: an email of the development mailbox, headers and body. Its own
  // scope, apart from read:email_outbox: a body holds a verification link, a credential.
  'read:email_messages',
];

export const ALL_SCOPES: readonly string[] = [
  ...actionsByResource.flatMap(([letters, resources]) =>
    resources.flatMap((resource) => [...letters].map((letter) => `${actionNames[letter]}:${resource}`)),
  ),
  ...EXTENSION_SCOPES,
];

const known = new Set(ALL_SCOPES);
export const isScope = (scope: string): boolean => known.has(scope);
