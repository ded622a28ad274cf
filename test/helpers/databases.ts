import { describe } from 'node:test';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Migrator } from 'kysely';
import pg from 'pg';
import type { Database } from '../../src/db/database.ts';
import { migrations } from '../../src/db/migrations/index.ts';

export interface TestDatabase {
  kind: 'sqlite' | 'postgres';
  dataDir: string;
  databaseUrl: string | undefined;
  drop(): Promise<void>;
}

/** SQLite always; PostgreSQL too when TEST_DATABASE_URL is set. Every test suite runs on each. */
export function databaseKinds(): Array<'sqlite' | 'postgres'> {
  return process.env.TEST_DATABASE_URL ? ['sqlite', 'postgres'] : ['sqlite'];
}

/**
 * A database of its own for one test suite: a fresh SQLite directory, or a fresh PostgreSQL database
 * (with `icuLocale`, one whose own collation is that ICU locale's, as an operator's database may be).
 */
export async function createTestDatabase(
  kind: 'sqlite' | 'postgres',
  options: { icuLocale?: string } = {},
): Promise<TestDatabase> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-test-'));
  if (kind === 'sqlite') {
    return {
      kind,
      dataDir,
      databaseUrl: undefined,
      drop: async () => fs.rmSync(dataDir, { recursive: true, force: true }),
    };
  }
  const adminUrl = process.env.TEST_DATABASE_URL;
  if (!adminUrl) throw new Error('TEST_DATABASE_URL is not set');
  const name = `tenantry_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  const locale = options.icuLocale;
  await admin.query(
    locale === undefined
      ? `CREATE DATABASE ${name}`
      : `CREATE DATABASE ${name} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE ${admin.escapeLiteral(locale)}`,
  );
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    kind,
    dataDir,
    databaseUrl: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Declares `suites` once per database of databaseKinds(), each database in a suite of its own that
 * runs its tests one at a time. Called inside a `describe(name, { concurrency: true }, ...)` the
 * databases run side by side: for files whose time is mostly waiting (for a cache to expire, a retry
 * to come due, a lease to run out), as each database has its own server, a run on both pays it once.
 */
export function eachDatabase(suites: (kind: 'sqlite' | 'postgres') => void): void {
  for (const kind of databaseKinds()) describe(kind, { concurrency: 1 }, () => suites(kind));
}

/** Brings a database to the named migration only: an upgrade test writes what an earlier version left. */
export async function migrateTo(database: Database, name: string): Promise<void> {
  const migrator = new Migrator({
    db: database.db,
    provider: { getMigrations: async () => migrations },
    migrationTableName: 'tenantry_migrations',
    migrationLockTableName: 'tenantry_migrations_lock',
  });
  const { error } = await migrator.migrateTo(name);
  if (error) throw error;
}
