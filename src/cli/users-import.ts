import fs from 'node:fs';
import { DEFAULT_TENANT_ID } from '../bootstrap.ts';
import { ImportError } from '../modules/users/import-file.ts';
import { importUsers } from '../modules/users/import.ts';
import { parseFlags, print, UsageError, withServices } from './args.ts';
import { progressReporter } from './progress.ts';
import { requireTenant } from './clients.ts';

export async function usersCommand([sub, ...args]: string[]): Promise<void> {
  if (sub !== 'import')
    throw new UsageError(`users: expected "import", got ${sub === undefined ? 'nothing' : `"${sub}"`}`);
  const flags = parseFlags('users import', args, ['file', 'tenant', 'batch']);
  const file = flags.required('file');
  const tenantId = flags.string('tenant') ?? DEFAULT_TENANT_ID;
  const batchSize = flags.integer('batch', 5000);
  if (!fs.existsSync(file)) throw new UsageError(`users import: no file ${file}`);
  return withServices(async (services) => {
    const tenant = await requireTenant(services, tenantId);
    // This connection only lives for the import.
    services.users.prepareForImport();
    const progress = progressReporter('users');
    try {
      const { imported, seconds } = await importUsers(services.users, tenant.id, file, batchSize, progress.update);
      progress.end();
      const rate = seconds > 0 ? Math.round(imported / seconds) : imported;
      print(`Imported ${imported} users into tenant ${tenant.id} in ${seconds.toFixed(1)} s (${rate} users/s).`);
    } catch (error) {
      progress.end();
      if (error instanceof ImportError) {
        throw new UsageError(
          `${error.message}. Import stopped; ${error.imported} users of earlier batches were imported.`,
        );
      }
      throw error;
    }
  });
}
