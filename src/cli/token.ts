import { ADMIN_CLIENT_NAME, DEFAULT_TENANT_ID } from '../bootstrap.ts';
import { managementAudienceOf } from '../modules/oauth/access-tokens.ts';
import { parseFlags, print, UsageError, withServices } from './args.ts';
import { checkScopes, requireTenant } from './clients.ts';

/** Prints a Management API access token, as POST /oauth/token would issue it, for use with curl. */
export async function tokenCommand(args: string[]): Promise<void> {
  const flags = parseFlags('token', args, ['tenant', 'client-id', 'scopes']);
  const tenantId = flags.string('tenant') ?? DEFAULT_TENANT_ID;
  const requested = flags.list('scopes');
  if (requested) checkScopes(requested);
  return withServices(async (services) => {
    const tenant = await requireTenant(services, tenantId);
    const clientId = flags.string('client-id');
    const client =
      clientId === undefined
        ? (await services.clients.list(tenant.id)).find((c) => c.name === ADMIN_CLIENT_NAME)
        : await services.clients.get(tenant.id, clientId);
    if (!client) {
      throw new UsageError(
        clientId === undefined
          ? `tenant "${tenant.id}" has no "${ADMIN_CLIENT_NAME}" client; give --client-id`
          : `no client "${clientId}" on tenant "${tenant.id}"`,
      );
    }
    const missing = (requested ?? []).filter((s) => !client.scopes.includes(s));
    if (missing.length > 0) throw new UsageError(`client ${client.clientId} is not granted: ${missing.join(', ')}`);
    const { accessToken } = await services.accessTokens.issue({
      tenant,
      domain: tenant.domain,
      clientId: client.clientId,
      audience: managementAudienceOf(tenant.domain),
      scopes: requested ?? client.scopes,
    });
    print(accessToken);
  });
}
