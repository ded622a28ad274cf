// The package's entry: `import { createTenantry } from 'tenantry'`.
export {
  createTenantry,
  type Seed,
  type SeedClient,
  type SeedTenant,
  type SeedUser,
  type Snapshot,
  type Tenantry,
  type TenantryOptions,
} from './embed/create-tenantry.ts';
