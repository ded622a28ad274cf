import fs from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import {
  CompiledQuery,
  Kysely,
  sql,
  Migrator,
  PostgresDialect,
  PostgresDriver,
  SqliteDialect,
  SqliteDriver,
  type DatabaseConnection,
  type Driver,
  type Insertable,
  type PostgresDialectConfig,
  type SqliteDialectConfig,
  type Transaction,
} from 'kysely';
import type pg from 'pg';
import { SqliteLimitPlugin } from './sqlite-limit.ts';
import { lazyModule } from '../lazy-module.ts';
import { migrations } from './migrations/index.ts';
import type { Schema } from './schema.ts';
import { databaseUnavailable } from './unavailable.ts';

export type Dialect = 'sqlite' | 'postgres';
export type Tx = Transaction<Schema>;

/**
 * The database as the rest of the server sees it: one typed query builder for both dialects, plus
 * the raw driver handle for the few hot paths where a cached prepared statement is worth it.
 */
export interface Database {
  dialect: Dialect;
  db: Kysely<Schema>;
  sqlite?: BetterSqlite3.Database;
  pool?: pg.Pool;
  close(): Promise<void>;
}

/** The PostgreSQL driver, loaded by the first PostgreSQL database opened (see lazyModule). */
export const pgDriver = lazyModule<typeof pg>('pg');
let typesSet = false;

export function openDatabase(options: {
  databaseUrl?: string;
  dataDir: string;
  sqliteSynchronous?: 'full' | 'normal';
  /** An SQLite database in memory only, gone when it is closed: nothing is written to DATA_DIR. */
  sqliteMemory?: boolean;
}): Database {
  if (options.databaseUrl) {
    const driver = pgDriver();
    if (!typesSet) {
      // PostgreSQL returns BIGINT/NUMERIC as strings by default; counts are small enough for numbers.
      driver.types.setTypeParser(20, (v) => Number(v));
      typesSet = true;
    }
    const pool = new driver.Pool({ connectionString: options.databaseUrl, max: 10 });
    // A connection the server ends (restart, failover, pg_terminate_backend, a proxy's idle timeout)
    // is dropped by the pool and replaced on the next query. Its 'error' event, raised on the pool when
    // it was idle and on the client itself when it was lent out, must be heard: unheard, it would end
    // the process.
    pool.on('error', () => undefined);
    pool.on('connect', (client) => client.on('error', () => undefined));
    const db = new Kysely<Schema>({ dialect: new CausePreservingPostgresDialect({ pool }) });
    return { dialect: 'postgres', db, pool, close: () => db.destroy() };
  }
  let sqlite: BetterSqlite3.Database;
  if (options.sqliteMemory) {
    sqlite = new BetterSqlite3(':memory:');
  } else {
    fs.mkdirSync(options.dataDir, { recursive: true });
    const file = path.join(options.dataDir, 'tenantry.sqlite');
    // Created owner-only before SQLite opens it; its -wal and -shm files inherit the mode.
    fs.closeSync(fs.openSync(file, 'a', 0o600));
    sqlite = new BetterSqlite3(file);
    sqlite.pragma('journal_mode = WAL');
    // The log is copied back into the database (a checkpoint, with its sync of the database file, on
    // the event loop) once it holds 10,000 pages rather than SQLite's 1,000: the delivery worker's
    // commits wrote 1,000 pages 20 times a second, and every checkpoint copied the same hot index pages
    // again; with 10,000, about 14% more deliveries a second (docs/benchmarks.md). The log, reused from
    // its start after each checkpoint, stays near 40 MiB on disk; one that grew past 64 MiB while a long
    // read held it is cut back.
    sqlite.pragma('wal_autocheckpoint = 10000');
    sqlite.pragma(`journal_size_limit = ${64 * 1024 * 1024}`);
  }
  // FULL unless told otherwise: in WAL mode NORMAL acknowledges commits that a power loss can still undo.
  sqlite.pragma(`synchronous = ${options.sqliteSynchronous === 'normal' ? 'NORMAL' : 'FULL'}`);
  sqlite.pragma('busy_timeout = 5000');
  sqlite.pragma('foreign_keys = ON');
  const db = new Kysely<Schema>({ dialect: new ImmediateSqliteDialect(sqlite), plugins: [new SqliteLimitPlugin()] });
  return { dialect: 'sqlite', db, sqlite, close: () => db.destroy() };
}

/**
 * SQLite transactions take the write lock as they begin (BEGIN IMMEDIATE). A deferred transaction that
 * reads and then writes fails at once with "database is locked", without waiting out the busy timeout,
 * when another process (a CLI command beside a running server) wrote in between; one that takes the
 * lock first waits its turn instead. Within a process nothing is lost: its one connection runs
 * transactions one after another anyway.
 */
class ImmediateSqliteDriver extends SqliteDriver {
  constructor(
    private readonly sqlite: BetterSqlite3.Database,
    config: SqliteDialectConfig,
  ) {
    super(config);
  }

  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }

  /**
   * Some failures (SQLITE_FULL, SQLITE_IOERR, SQLITE_BUSY, SQLITE_NOMEM) end the transaction within
   * SQLite already. A ROLLBACK then fails with "no transaction is active", and that error, not the
   * one that caused it, would reach the caller and the logs.
   */
  override async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    if (this.sqlite.inTransaction) await super.rollbackTransaction(connection);
  }
}

class ImmediateSqliteDialect extends SqliteDialect {
  constructor(private readonly sqlite: BetterSqlite3.Database) {
    super({ database: sqlite });
  }

  override createDriver(): Driver {
    return new ImmediateSqliteDriver(this.sqlite, { database: this.sqlite });
  }
}

/**
 * A transaction whose connection the server ended (pg_terminate_backend, a restart, a failover) is
 * over with it; the ROLLBACK that follows fails on the dead connection, and that error, not the one
 * that named the cause (57P01 admin_shutdown, …), would reach the caller and the logs.
 */
class CausePreservingPostgresDriver extends PostgresDriver {
  override async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    try {
      await super.rollbackTransaction(connection);
    } catch (error) {
      if (databaseUnavailable(error)?.errorCode !== 'database_unavailable') throw error;
    }
  }
}

class CausePreservingPostgresDialect extends PostgresDialect {
  constructor(private readonly settings: PostgresDialectConfig) {
    super(settings);
  }

  override createDriver(): Driver {
    return new CausePreservingPostgresDriver(this.settings);
  }
}

const migratorOf = (database: Database) =>
  new Migrator({
    db: database.db,
    provider: { getMigrations: async () => migrations },
    migrationTableName: 'tenantry_migrations',
    migrationLockTableName: 'tenantry_migrations_lock',
  });

export async function migrate(database: Database): Promise<void> {
  const { error, results } = await migratorOf(database).migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName;
    throw new Error(`database migration ${failed ?? ''} failed: ${String(error)}`);
  }
}

/** True when an error is a foreign-key violation, in either dialect. */
export function isForeignKeyViolation(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code;
  return code === '23503' || code === 'SQLITE_CONSTRAINT_FOREIGNKEY';
}

/** Rows a multi-row insert carries at most: 1,000 rows of up to 30 columns stay under SQLite's 32,766 bound parameters. */
const ROWS_PER_INSERT = 1000;

/** Inserts `rows` in multi-row statements of at most ROWS_PER_INSERT rows, inside the caller's transaction. */
export async function insertInSlices<T extends keyof Schema & string>(
  trx: Tx,
  table: T,
  rows: ReadonlyArray<Insertable<Schema[T]>>,
): Promise<void> {
  for (let i = 0; i < rows.length; i += ROWS_PER_INSERT) {
    await trx
      .insertInto(table)
      .values(rows.slice(i, i + ROWS_PER_INSERT) as never)
      .execute();
  }
}

/** True when an error is a unique-constraint violation, in either dialect. */
export function isUniqueViolation(error: unknown): boolean {
  const e = error as { code?: string } | null;
  return e?.code === '23505' || e?.code === 'SQLITE_CONSTRAINT_UNIQUE' || e?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

/**
 * What `work` yields, or, when it fails on a unique constraint, the error `conflict` makes: how a
 * write says that what it would add (a name, an id) is already taken.
 */
export async function uniqueOr<T>(work: Promise<T>, conflict: () => Error): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict();
    throw error;
  }
}

/** Resolves when the database answers a trivial query: what readiness and /health ask. */
export async function ping(database: Database): Promise<void> {
  await sql`select 1`.execute(database.db);
}

export const now = (): string => new Date().toISOString();

/**
 * A timestamp strictly after `previous`: two updates within one millisecond (or a clock stepping
 * back) still yield an updated_at that moves forward.
 */
export function nowAfter(previous: string): string {
  const current = now();
  return current > previous ? current : new Date(Date.parse(previous) + 1).toISOString();
}

/**
 * Runs `work` in one transaction: how a service makes one mutation out of several stores' writes,
 * handing each store the same `Tx`. Services open transactions with this and never write SQL.
 */
export function transaction<T>(database: Database, work: (trx: Tx) => Promise<T>): Promise<T> {
  return database.db.transaction().execute(work);
}

/**
 * True when every migration this build knows has been run on the database: a node must not take
 * traffic on a schema older than its code (another node may still be migrating it).
 */
export async function migrationsComplete(database: Database): Promise<boolean> {
  const known = await migratorOf(database).getMigrations();
  return known.every((migration) => migration.executedAt !== undefined);
}
