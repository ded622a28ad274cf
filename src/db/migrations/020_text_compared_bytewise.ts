import { sql, type Kysely } from 'kysely';
import { isPostgres } from './dialect.ts';

/**
 * On PostgreSQL every text column of the schema is compared bytewise (`COLLATE "C"`), as SQLite compares
 * them (BINARY), whatever the database's own collation:
 * - Both databases order ids, names and times alike. Under a linguistic collation (en_US, say) PostgreSQL
 *   compared upper and lower case alike first, so event ids, which begin with their time in base58
 *   (ids.ts), were listed out of time order and pages came in another order than on SQLite.
 * - A bytewise comparison is a memcmp, where any other collation calls the C library's strcoll for every
 *   key compared (C.UTF-8 included: PostgreSQL treats only "C" and "POSIX" as bytewise). A redelivery
 *   writes five index entries a delivery; 1,000,000 took about 15% longer under C.UTF-8.
 * Equality is unchanged (PostgreSQL's deterministic collations break ties bytewise), so no unique index
 * can fail to rebuild. Each table's columns change in one ALTER TABLE: its indexes are rebuilt once and the
 * rows are not rewritten. Tables added later declare their text columns `COLLATE "C"` on PostgreSQL
 * (test/db/migration-020.test.ts checks the whole schema).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (!(await isPostgres(db))) return;
  const { rows } = await sql<{ table_name: string; column_name: string }>`
    SELECT c.relname AS table_name, a.attname AS column_name
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
      AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
      AND a.atttypid = 'text'::regtype AND a.attcollation <> 'pg_catalog."C"'::regcollation
      AND c.relname NOT IN ('tenantry_migrations', 'tenantry_migrations_lock')
    ORDER BY c.relname, a.attnum`.execute(db);
  const columnsByTable = new Map<string, string[]>();
  for (const { table_name, column_name } of rows) {
    columnsByTable.set(table_name, [...(columnsByTable.get(table_name) ?? []), column_name]);
  }
  for (const [table, columns] of columnsByTable) {
    const changes = columns.map((column) => sql`ALTER COLUMN ${sql.id(column)} TYPE text COLLATE "C"`);
    await sql`ALTER TABLE ${sql.id(table)} ${sql.join(changes)}`.execute(db);
  }
}
