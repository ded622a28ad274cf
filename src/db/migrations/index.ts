import type { Migration } from 'kysely';
import * as foundation from './001_foundation.ts';

/** Every migration, in order. Names sort in the order they must run. */
export const migrations: Record<string, Migration> = {
  '001_foundation': foundation,
};
