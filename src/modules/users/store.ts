import type { Statement } from 'better-sqlite3';
import { insertInSlices, isUniqueViolation, type Database, type Tx } from '../../db/database.ts';
import type { UsersTable } from '../../db/schema.ts';

/** A stored user: every column of the users table. */
export type UserRecord = UsersTable;

/** A user an import batch collides with. */
export interface ImportMatch {
  user_id: string;
  email: string | null;
  document: string;
  updated_at: string;
}

/** What a read returns: the stored document (without tokens) and the sealed identity-provider tokens. */
export interface StoredUser {
  document: string;
  idp_tokens: string | null;
}

const COLUMNS: ReadonlyArray<keyof UserRecord> = [
  'tenant_id',
  'user_id',
  'connection',
  'email',
  'document',
  'idp_tokens',
  'password_hash',
  'created_at',
  'updated_at',
];

/**
 * Every query on the users table, for both dialects. The unique keys (user_id per tenant; email per
 * tenant and connection) are reported as results: the service decides what a taken key means.
 */
export class UserStore {
  private byEmailStatement: Statement<[string, string], StoredUser> | undefined;
  private insertStatement: Statement<unknown[], void> | undefined;

  constructor(private readonly database: Database) {}

  /**
   * GET /users-by-email, the hot path: an exact, case-sensitive match on an index through a cached
   * prepared statement (better-sqlite3's, or a named PostgreSQL statement).
   */
  async byEmail(tenantId: string, email: string): Promise<StoredUser[]> {
    if (this.database.sqlite) {
      this.byEmailStatement ??= this.database.sqlite.prepare<[string, string], StoredUser>(
        'SELECT document, idp_tokens FROM users WHERE tenant_id = ? AND email = ? ORDER BY created_at, user_id',
      );
      return this.byEmailStatement.all(tenantId, email);
    }
    const result = await this.database.pool!.query<StoredUser>({
      name: 'users_by_email',
      text: 'SELECT document, idp_tokens FROM users WHERE tenant_id = $1 AND email = $2 ORDER BY created_at, user_id',
      values: [tenantId, email],
    });
    return result.rows;
  }

  /** A tenant's users in user_id order, `limit` after `afterUserId`: what a seed export walks. */
  async page(
    tenantId: string,
    afterUserId: string | undefined,
    limit: number,
  ): Promise<Array<{ user_id: string; document: string; password_hash: string | null }>> {
    let query = this.database.db
      .selectFrom('users')
      .select(['user_id', 'document', 'password_hash'])
      .where('tenant_id', '=', tenantId);
    if (afterUserId !== undefined) query = query.where('user_id', '>', afterUserId);
    return query.orderBy('user_id').limit(limit).execute();
  }

  async get(tenantId: string, userId: string): Promise<StoredUser | undefined> {
    return this.database.db
      .selectFrom('users')
      .select(['document', 'idp_tokens'])
      .where('tenant_id', '=', tenantId)
      .where('user_id', '=', userId)
      .executeTakeFirst();
  }

  /** Inserts one user in the caller's transaction; false when its user_id, or its email in its connection, is taken. */
  async insert(trx: Tx, record: UserRecord): Promise<boolean> {
    return keyFree(() => trx.insertInto('users').values(record).execute());
  }

  /**
   * Inserts a batch of users in the caller's transaction, taking each record as it is inserted (on
   * SQLite); false when any key is taken (nothing of it then commits).
   */
  async insertMany(trx: Tx, records: Iterable<UserRecord>): Promise<boolean> {
    const sqlite = this.database.sqlite;
    return keyFree(async () => {
      if (!sqlite) return insertInSlices(trx, 'users', [...records]);
      // Kysely's transaction holds this same better-sqlite3 handle, so these writes commit or roll back
      // with it; a cached prepared statement runs several times faster than building SQL per batch.
      // Its parameters are positional: binding them from an object's named members took 10% longer.
      this.insertStatement ??= sqlite.prepare<unknown[], void>(
        `INSERT INTO users (${COLUMNS.join(', ')}) VALUES (${COLUMNS.map(() => '?').join(', ')})`,
      );
      for (const record of records) this.insertStatement.run(...COLUMNS.map((column) => record[column]));
    });
  }

  /**
   * Before a bulk import on this connection. The table's indexes have random keys (ids, emails): with
   * SQLite's default 2 MB page cache every insert of a large import reads pages back from disk. 64 MiB:
   * a million users import as fast as with 512 MiB (15.7 s against 16.6 s) at 300 MB peak RSS instead
   * of 742 MB (`npm run bench -- import`). Only for a connection that lives for the import (the CLI's);
   * PostgreSQL needs nothing.
   */
  widenCacheForImport(): void {
    this.database.sqlite?.pragma('cache_size = -65536');
  }

  /** Deletes a user in the caller's transaction; returns its document, or undefined when there was none. */
  async delete(trx: Tx, tenantId: string, userId: string): Promise<string | undefined> {
    const row = await trx
      .deleteFrom('users')
      .where('tenant_id', '=', tenantId)
      .where('user_id', '=', userId)
      .returning(['document'])
      .executeTakeFirst();
    return row?.document;
  }

  /** The stored document, locked against concurrent changes until the transaction ends (PostgreSQL; SQLite writes are serialised). */
  async lock(trx: Tx, tenantId: string, userId: string): Promise<{ document: string; updatedAt: string } | undefined> {
    const row = await trx
      .selectFrom('users')
      .select(['document', 'updated_at'])
      .where('tenant_id', '=', tenantId)
      .where('user_id', '=', userId)
      .$if(this.database.dialect === 'postgres', (q) => q.forUpdate())
      .executeTakeFirst();
    return row && { document: row.document, updatedAt: row.updated_at };
  }

  /**
   * The users an import batch could collide with, in the caller's transaction: those holding one of
   * `userIds`, or one of `emails` in `connection`. Two index lookups (the primary key; the unique email
   * key), locked against concurrent changes on PostgreSQL.
   */
  async importMatches(
    trx: Tx,
    tenantId: string,
    connection: string,
    userIds: readonly string[],
    emails: readonly string[],
  ): Promise<ImportMatch[]> {
    const columns = ['user_id', 'email', 'document', 'updated_at'] as const;
    const postgres = this.database.dialect === 'postgres';
    const byId =
      userIds.length === 0
        ? []
        : await trx
            .selectFrom('users')
            .select(columns)
            .where('tenant_id', '=', tenantId)
            .where('user_id', 'in', userIds)
            .$if(postgres, (q) => q.forUpdate())
            .execute();
    const byEmail =
      emails.length === 0
        ? []
        : await trx
            .selectFrom('users')
            .select(columns)
            .where('tenant_id', '=', tenantId)
            .where('connection', '=', connection)
            .where('email', 'in', emails)
            .$if(postgres, (q) => q.forUpdate())
            .execute();
    return [...byId, ...byEmail];
  }

  /**
   * Stores a changed document (and, when given, a new password hash) in the caller's transaction;
   * false when its new email is taken in its connection.
   */
  async update(
    trx: Tx,
    tenantId: string,
    userId: string,
    change: { document: string; email: string | null; updatedAt: string; passwordHash?: string },
  ): Promise<boolean> {
    return keyFree(() =>
      trx
        .updateTable('users')
        .set({
          document: change.document,
          email: change.email,
          updated_at: change.updatedAt,
          ...(change.passwordHash === undefined ? {} : { password_hash: change.passwordHash }),
        })
        .where('tenant_id', '=', tenantId)
        .where('user_id', '=', userId)
        .execute(),
    );
  }
}

/** Runs a write; false when it failed on a unique key. */
async function keyFree(write: () => unknown): Promise<boolean> {
  try {
    await write();
    return true;
  } catch (error) {
    if (isUniqueViolation(error)) return false;
    throw error;
  }
}
