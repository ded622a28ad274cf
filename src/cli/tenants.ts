import { provisionTenant } from '../bootstrap.ts';
import { TENANT_ID_PATTERN, TenantTaken } from '../modules/tenants/service.ts';
import { parseFlags, print, printRow, UsageError, withServices } from './args.ts';

export async function tenantsCommand([sub, ...args]: string[]): Promise<void> {
  switch (sub) {
    case 'create': {
      const flags = parseFlags('tenants create', args, ['id', 'domain']);
      const id = flags.required('id');
      const domain = flags.required('domain');
      if (!TENANT_ID_PATTERN.test(id))
        throw new UsageError(`tenants create: --id "${id}" must be 3–64 lower-case letters, digits and dashes`);
      return withServices(async (services) => {
        if (await services.tenants.get(id)) throw new UsageError(`tenant "${id}" already exists`);
        if (await services.tenants.byDomain(domain))
          throw new UsageError(`domain "${domain}" already belongs to a tenant`);
        // Another process may have taken the id or domain between the checks and the insert.
        const tenant = await provisionTenant(services, id, domain).catch((error: unknown) => {
          throw error instanceof TenantTaken
            ? new UsageError(`tenant "${id}" or domain "${domain}" already exists`)
            : error;
        });
        print(`Created tenant ${tenant.id} on https://${tenant.domain}/api/v2/`);
      });
    }
    case 'list': {
      parseFlags('tenants list', args, []);
      return withServices(async (services) => {
        for (const tenant of await services.tenants.list()) printRow(tenant.id, tenant.domain);
      });
    }
    default:
      throw new UsageError(`tenants: expected "create" or "list", got ${sub === undefined ? 'nothing' : `"${sub}"`}`);
  }
}
