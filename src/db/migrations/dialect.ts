import { sql, type Kysely } from 'kysely';

/**
 * Migrations see the database untyped; the few that differ by dialect ask which one it is, with a query
 * only PostgreSQL knows: its failure on SQLite costs nothing.
 */
export async function isPostgres(db: Kysely<unknown>): Promise<boolean> {
  try {
    await sql`SELECT current_setting('server_version')`.execute(db);
    return true;
  } catch {
    return false;
  }
}
