import { parseFlags, print, UsageError, withServices } from './args.ts';
import { requireTenant } from './clients.ts';

export async function keysCommand([sub, ...args]: string[]): Promise<void> {
  switch (sub) {
    case 'rotate': {
      const flags = parseFlags('keys rotate', args, ['tenant']);
      const tenantId = flags.required('tenant');
      return withServices(async (services) => {
        const tenant = await requireTenant(services, tenantId);
        const kid = await services.signingKeys.rotate(tenant.id);
        print(
          `New signing key ${kid} is current on tenant ${tenant.id}; the previous key still verifies until revoked.`,
        );
      });
    }
    case 'revoke': {
      const flags = parseFlags('keys revoke', args, ['tenant', 'kid']);
      const tenantId = flags.required('tenant');
      const kid = flags.required('kid');
      return withServices(async (services) => {
        const tenant = await requireTenant(services, tenantId);
        if (!(await services.signingKeys.revoke(tenant.id, kid))) {
          throw new UsageError(
            `tenant ${tenant.id} has no previous key "${kid}" (only a key rotated out can be revoked)`,
          );
        }
        print(`Revoked signing key ${kid} of tenant ${tenant.id}: tokens it signed are refused from now on.`);
      });
    }
    default:
      throw new UsageError(`keys: expected "rotate" or "revoke", got ${sub === undefined ? 'nothing' : `"${sub}"`}`);
  }
}
