import { sql, type Selectable } from 'kysely';
import { insertInSlices, transaction, type Database, type Tx } from '../db/database.ts';
import type { Schema } from '../db/schema.ts';

/**
 * Every table of the schema, parents before the tables whose foreign keys point at them: restoring
 * inserts in this order and deletes in the reverse one, so no foreign key is ever left dangling.
 */
export const SNAPSHOT_TABLES = [
  'tenants',
  'signing_keys',
  'clients',
  'connections',
  'users',
  'segments',
  'captcha_settings',
  'captcha_providers',
  'event_streams',
  'events',
  'deliveries',
  'delivery_attempts',
  'delivery_counts',
  'event_stream_redeliveries',
  'custom_domains',
  'custom_domain_defaults',
  'custom_domain_certificates',
  'email_templates',
  'email_outbox',
  'email_verification_tickets',
  'jobs',
  'users_imports',
  'users_import_chunks',
  'users_import_errors',
] as const satisfies ReadonlyArray<keyof Schema>;

// A table added to the schema but not above would silently survive every restore: refuse to compile.
type Unlisted = Exclude<keyof Schema, (typeof SNAPSHOT_TABLES)[number]>;
const everyTableListed: [Unlisted] extends [never] ? true : Unlisted = true;
void everyTableListed;

/**
 * Rows without their leases: every column named `…claimed_until` (a worker's claim on the row, see
 * db/claim-due.ts) set to null. The workers that held them at the copy hold nothing after a restore
 * (they are paused while it runs), so a restored lease would only keep its row — a delivery in flight,
 * a deletion or a redelivery under way — waiting until it ran out, up to DELIVERY_LEASE_MS or 30 s.
 */
function withoutLeases<Row extends object>(rows: Row[]): Row[] {
  const leases = rows.length === 0 ? [] : Object.keys(rows[0]!).filter((column) => column.endsWith('claimed_until'));
  if (leases.length === 0) return rows;
  return rows.map((row) => ({ ...row, ...Object.fromEntries(leases.map((column) => [column, null])) }));
}

/** Every row of every table, as read (leases aside, see withoutLeases): what a restore writes back. */
export type TableRows = { [T in keyof Schema]: ReadonlyArray<Selectable<Schema[T]>> };

/**
 * Copies every table's rows. Read in one transaction, so the copy is one consistent state even
 * while requests write: SQLite's single connection runs it alone; on PostgreSQL it is REPEATABLE READ,
 * every table read in the same snapshot (under READ COMMITTED each statement would see its own).
 */
export async function copyTables(database: Database): Promise<TableRows> {
  const read = async (trx: Tx) => {
    const rows: Partial<Record<keyof Schema, unknown>> = {};
    for (const table of SNAPSHOT_TABLES) rows[table] = withoutLeases(await trx.selectFrom(table).selectAll().execute());
    return rows as TableRows;
  };
  if (database.dialect === 'postgres')
    return database.db.transaction().setIsolationLevel('repeatable read').execute(read);
  return transaction(database, read);
}

/** Replaces every table's rows with `rows`, in one transaction: other readers see the old state or the new one. */
export async function replaceTables(database: Database, rows: TableRows): Promise<void> {
  await transaction(database, async (trx) => {
    // On PostgreSQL other connections write meanwhile: a row one inserted between the deletes and the
    // commit would survive the restore. Every table is locked first (SQLite's one writer needs nothing).
    if (database.dialect === 'postgres')
      await sql`LOCK TABLE ${sql.join(SNAPSHOT_TABLES.map((t) => sql.table(t)))} IN ACCESS EXCLUSIVE MODE`.execute(trx);
    for (const table of [...SNAPSHOT_TABLES].reverse()) await trx.deleteFrom(table).execute();
    for (const table of SNAPSHOT_TABLES) {
      const tableRows = rows[table];
      if (tableRows.length > 0) await insertInSlices(trx, table, tableRows as never);
    }
  });
}
