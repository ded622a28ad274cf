import type { Database } from '../db/database.ts';
import { ALL_SCOPES, isScope } from '../modules/oauth/scopes.ts';
import { TenantService } from '../modules/tenants/service.ts';
import { parseFlags, print, printRow, UsageError, withServices } from './args.ts';

export async function requireTenant(services: { tenants: Pick<TenantService, 'get'> }, id: string) {
  const tenant = await services.tenants.get(id);
  if (!tenant) throw new UsageError(`no tenant "${id}" (see: tenantry tenants list)`);
  return tenant;
}

/** requireTenant for commands that open the database without the services (events tail). */
export async function requireTenantIn(database: Database, id: string) {
  return requireTenant({ tenants: TenantService.reading(database) }, id);
}

export function checkScopes(scopes: readonly string[]): void {
  const unknown = scopes.filter((s) => !isScope(s));
  if (unknown.length > 0) throw new UsageError(`unknown scopes: ${unknown.join(', ')}`);
}

export async function clientsCommand([sub, ...args]: string[]): Promise<void> {
  switch (sub) {
    case 'create': {
      const flags = parseFlags('clients create', args, ['tenant', 'name', 'scopes'], ['all-scopes']);
      const tenantId = flags.required('tenant');
      const name = flags.required('name');
      const listed = flags.list('scopes');
      if (flags.boolean('all-scopes') === (listed !== undefined))
        throw new UsageError('clients create: give either --scopes or --all-scopes');
      const scopes = listed ?? ALL_SCOPES;
      checkScopes(scopes);
      return withServices(async (services) => {
        const tenant = await requireTenant(services, tenantId);
        const client = await services.clients.create(tenant.id, { name, scopes });
        print(
          `Created client "${client.name}" on tenant ${tenant.id} with ${client.scopes.length} scopes. The secret is shown only this once:`,
          `client_id:     ${client.clientId}`,
          `client_secret: ${client.clientSecret}`,
        );
      });
    }
    case 'list': {
      const flags = parseFlags('clients list', args, ['tenant']);
      const tenantId = flags.required('tenant');
      return withServices(async (services) => {
        const tenant = await requireTenant(services, tenantId);
        for (const client of await services.clients.list(tenant.id))
          printRow(client.clientId, client.name, client.scopes.join(' '));
      });
    }
    default:
      throw new UsageError(`clients: expected "create" or "list", got ${sub === undefined ? 'nothing' : `"${sub}"`}`);
  }
}
