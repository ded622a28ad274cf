import { randomBytes, scrypt as scryptCallback, type BinaryLike, type ScryptOptions } from 'node:crypto';
import type { Statement } from 'better-sqlite3';
import type { Database, Tx } from '../../db/database.ts';
import type { UsersTable } from '../../db/schema.ts';
import { insertInSlices, now, nowAfter, uniqueOr } from '../../db/database.ts';
import { ApiError, badRequest, conflict, notFound } from '../../http/errors.ts';
import { newId } from '../../ids.ts';
import type { SecretBox } from '../../secret-box.ts';
import type { ConnectionService } from '../connections/service.ts';
import {
  buildUser, OWN_PROVIDER, OWN_PROVIDER_ALIASES, project, separateIdpTokens,
  type Identity, type IdpTokens, type Profile, type User,
} from './user.ts';

const scrypt = (password: BinaryLike, salt: BinaryLike, keylen: number, options: ScryptOptions) =>
  new Promise<Buffer>((resolve, reject) =>
    scryptCallback(password, salt, keylen, options, (err, key) => (err ? reject(err) : resolve(key))),
  );

async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, 32, { N: 16384, r: 8, p: 1 });
  return `scrypt$16384$8$1$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

export interface CreateUserInput extends Profile {
  connection: string;
  password?: string;
  user_id?: string;
  verify_email?: boolean;
}

/** One record of a bulk import (JSON array or NDJSON), as the import command reads it. */
export interface ImportedUser extends Profile {
  user_id?: string;
  connection?: string;
  identities?: Identity[];
  password_hash?: string;
}

export interface ReadOptions {
  fields: readonly string[];
  includeFields: boolean;
  withIdpTokens: boolean;
}

interface UserRow {
  document: string;
  idp_tokens: string | null;
}

interface UserChange {
  tenantId: string;
  type: 'user.created' | 'user.updated' | 'user.deleted';
  user: User;
}

/**
 * Tables other modules write in the same transaction as user changes (the events outbox). Changes
 * come in batches (an import brings thousands at once), so a listener can write them in bulk.
 */
export type UserChangeListener = (trx: Tx, changes: readonly UserChange[]) => Promise<void>;

/** What another module writes in a new user's insert transaction (its verification email), prepared before it opens. */
export type UserWrite = (trx: Tx) => Promise<unknown>;

const MIN_PASSWORD_LENGTH = 8;

type ImportRow = UsersTable;
const IMPORT_COLUMNS: ReadonlyArray<keyof ImportRow> = [
  'tenant_id', 'user_id', 'connection', 'email', 'document', 'idp_tokens', 'password_hash', 'created_at', 'updated_at',
];

export class UserService {
  private byEmailStatement: Statement<[string, string], UserRow> | undefined;
  private insertStatement: Statement<[ImportRow], void> | undefined;
  private readonly changeListeners: UserChangeListener[] = [];

  constructor(
    private readonly database: Database,
    private readonly connections: ConnectionService,
    private readonly secretBox: SecretBox,
  ) {}

  /** Called inside the transaction of every user change, so whatever it writes commits or rolls back with it. */
  onChange(listener: UserChangeListener): void {
    this.changeListeners.push(listener);
  }

  private async changed(trx: Tx, changes: readonly UserChange[]): Promise<void> {
    for (const listener of this.changeListeners) await listener(trx, changes);
  }

  /**
   * `prepare` is given the new user before its insert transaction opens, to do its slow work (render
   * a verification email) outside it; what it returns runs in that transaction, so what it writes
   * (the email in the outbox) commits or rolls back with the user.
   */
  async create(tenantId: string, input: CreateUserInput, prepare?: (user: User) => Promise<UserWrite | undefined>): Promise<User> {
    const connection = await this.connections.byName(tenantId, input.connection);
    if (!connection) throw new ApiError(400, 'The connection does not exist.', 'inexistent_connection');
    if (!OWN_PROVIDER_ALIASES.has(connection.strategy)) {
      throw new ApiError(400, `Connection strategy '${connection.strategy}' does not support creating users.`, 'operation_not_supported');
    }
    if (input.email === undefined) throw badRequest.body("Payload validation error: 'Missing required property: email'.");
    if (input.password === undefined) throw badRequest.body("Payload validation error: 'Missing required property: password'.");
    if (input.password.length < MIN_PASSWORD_LENGTH) throw new ApiError(400, 'PasswordStrengthError: Password is too weak', 'invalid_body');

    const { connection: connectionName, password, user_id: requestedId, verify_email: _verifyEmail, ...profile } = input;
    // The server is the identity provider here, so it stores the email lower-cased (spec section 1).
    profile.email = input.email.toLowerCase();
    const localId = requestedId ?? newId.userLocalId();
    const userId = `${OWN_PROVIDER}|${localId}`;
    const at = now();
    const user = buildUser(profile, [{ connection: connectionName, user_id: localId, provider: OWN_PROVIDER, isSocial: false }], userId, at);
    const passwordHash = await hashPassword(password);
    const write = await prepare?.(user);
    await uniqueOr(
      this.database.db.transaction().execute(async (trx) => {
        await trx
          .insertInto('users')
          .values({
            tenant_id: tenantId,
            user_id: userId,
            connection: connectionName,
            email: user.email ?? null,
            document: JSON.stringify(user),
            idp_tokens: null,
            password_hash: passwordHash,
            created_at: at,
            updated_at: at,
          })
          .execute();
        await this.changed(trx, [{ tenantId, type: 'user.created', user }]);
        await write?.(trx);
      }),
      () => conflict('The user already exists.', 'svc_idp_error'),
    );
    return user;
  }

  async get(tenantId: string, userId: string, options: ReadOptions): Promise<Record<string, unknown>> {
    const row = await this.database.db
      .selectFrom('users')
      .select(['document', 'idp_tokens'])
      .where('tenant_id', '=', tenantId)
      .where('user_id', '=', userId)
      .executeTakeFirst();
    if (!row) throw notFound.user();
    return this.present(row, options);
  }

  /** Idempotent, as the original: deleting a user that does not exist is not an error. */
  async delete(tenantId: string, userId: string): Promise<void> {
    await this.database.db.transaction().execute(async (trx) => {
      const row = await trx
        .deleteFrom('users')
        .where('tenant_id', '=', tenantId)
        .where('user_id', '=', userId)
        .returning(['document'])
        .executeTakeFirst();
      if (!row) return;
      const user = JSON.parse(row.document) as User;
      await this.changed(trx, [{ tenantId, type: 'user.deleted', user }]);
    });
  }

  /**
   * PATCH /users/{id}: the given profile members replace the stored ones; user_metadata and
   * app_metadata are merged one level deep (a null member removes a key), as the original.
   */
  async update(tenantId: string, userId: string, changes: Profile): Promise<User> {
    // Another user of the connection may hold the new email already (a unique key per tenant and connection).
    return uniqueOr(this.database.db.transaction().execute(async (trx) => {
      const locked = await this.lockUser(trx, tenantId, userId);
      if (!locked) throw notFound.user();
      const { user, updatedAt } = locked;
      const own = user.identities.some((i) => OWN_PROVIDER_ALIASES.has(i.provider));
      for (const [key, value] of Object.entries(changes)) {
        if (value === undefined) continue;
        if (key === 'user_metadata' || key === 'app_metadata') {
          const merged: Record<string, unknown> = { ...((user[key] as Record<string, unknown> | undefined) ?? {}) };
          for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
            if (v === null) delete merged[k];
            else merged[k] = v;
          }
          user[key] = merged;
        } else if (key === 'email' && own) {
          user.email = (value as string).toLowerCase();
        } else {
          user[key] = value;
        }
      }
      await this.saveUpdated(trx, tenantId, userId, user, updatedAt);
      return user;
    }), () => new ApiError(400, 'The specified new email already exists', 'svc_idp_error'));
  }

  /**
   * Marks the user's email verified, in the caller's transaction, if it is still `email` (a link sent
   * to an address the user has since changed verifies nothing). A change is a user.updated event.
   */
  async verifyEmail(trx: Tx, tenantId: string, userId: string, email: string): Promise<boolean> {
    const locked = await this.lockUser(trx, tenantId, userId);
    if (!locked) return false;
    const { user, updatedAt } = locked;
    if (user.email !== email) return false;
    if (user.email_verified === true) return true;
    user.email_verified = true;
    await this.saveUpdated(trx, tenantId, userId, user, updatedAt);
    return true;
  }

  /** The stored user, locked against concurrent changes until the transaction ends (PostgreSQL; SQLite writes are serialised). */
  private async lockUser(trx: Tx, tenantId: string, userId: string): Promise<{ user: User; updatedAt: string } | undefined> {
    const row = await trx
      .selectFrom('users')
      .select(['document', 'updated_at'])
      .where('tenant_id', '=', tenantId)
      .where('user_id', '=', userId)
      .$if(this.database.dialect === 'postgres', (q) => q.forUpdate())
      .executeTakeFirst();
    return row && { user: JSON.parse(row.document) as User, updatedAt: row.updated_at };
  }

  /** Stores a changed user with an `updated_at` that moves forward, and emits user.updated in the same transaction. */
  private async saveUpdated(trx: Tx, tenantId: string, userId: string, user: User, previousUpdatedAt: string): Promise<void> {
    user.updated_at = nowAfter(previousUpdatedAt);
    await trx
      .updateTable('users')
      .set({ document: JSON.stringify(user), email: user.email ?? null, updated_at: user.updated_at })
      .where('tenant_id', '=', tenantId)
      .where('user_id', '=', userId)
      .execute();
    await this.changed(trx, [{ tenantId, type: 'user.updated', user }]);
  }

  /**
   * GET /users-by-email, the hot path: an exact, case-sensitive match on an index through a cached
   * prepared statement, returned as JSON text. Without projection or tokens the stored documents are
   * spliced into the array as they are, with no parse and no re-serialisation.
   */
  async findByEmailJson(tenantId: string, email: string, options: ReadOptions): Promise<string> {
    const rows = await this.rowsByEmail(tenantId, email);
    if (options.fields.length === 0 && !(options.withIdpTokens && rows.some((r) => r.idp_tokens !== null))) {
      return `[${rows.map((r) => r.document).join(',')}]`;
    }
    return JSON.stringify(rows.map((row) => this.present(row, options)));
  }

  /** Bulk insert for the import command: one transaction per batch; returns how many were inserted. */
  async insertMany(tenantId: string, users: ImportedUser[]): Promise<number> {
    const at = now();
    const imported = users.map((record) => this.importRow(tenantId, record, at));
    const sqlite = this.database.sqlite;
    await this.database.db.transaction().execute(async (trx) => {
      if (sqlite) {
        // Kysely's transaction holds this same better-sqlite3 handle, so these writes commit or roll back
        // with it; a cached prepared statement runs several times faster than building SQL per batch.
        this.insertStatement ??= sqlite.prepare<[ImportRow], void>(
          `INSERT INTO users (${IMPORT_COLUMNS.join(', ')}) VALUES (${IMPORT_COLUMNS.map((c) => `@${c}`).join(', ')})`,
        );
        for (const { row } of imported) this.insertStatement.run(row);
      } else {
        await insertInSlices(trx, 'users', imported.map((r) => r.row));
      }
      await this.changed(trx, imported.map(({ user }): UserChange => ({ tenantId, type: 'user.created', user })));
    });
    return imported.length;
  }

  private importRow(tenantId: string, record: ImportedUser, at: string): { row: ImportRow; user: User } {
    const { user_id: givenId, connection: givenConnection, identities: givenIdentities, password_hash: passwordHash, ...profile } = record;
    const first = givenIdentities?.[0];
    const provider = first?.provider ?? OWN_PROVIDER;
    const own = OWN_PROVIDER_ALIASES.has(provider);
    // Only the server's own database lower-cases emails; other providers' emails keep their case.
    if (own && profile.email !== undefined) profile.email = profile.email.toLowerCase();
    const localId = String(first?.user_id ?? givenId?.replace(/^[^|]+\|/, '') ?? newId.userLocalId());
    const connection = first?.connection ?? givenConnection ?? 'Username-Password-Authentication';
    const identities: Identity[] = givenIdentities ?? [{ connection, user_id: localId, provider: OWN_PROVIDER, isSocial: false }];
    const userId = givenId ?? `${own ? OWN_PROVIDER : provider}|${localId}`;
    const separated = separateIdpTokens(identities.map((i) => (OWN_PROVIDER_ALIASES.has(i.provider) ? { ...i, provider: OWN_PROVIDER } : i)));
    const user = buildUser(profile, separated.identities, userId, at);
    const row = {
      tenant_id: tenantId,
      user_id: userId,
      connection,
      email: user.email ?? null,
      document: JSON.stringify(user),
      idp_tokens: separated.tokens ? this.secretBox.seal(JSON.stringify(separated.tokens)) : null,
      password_hash: passwordHash ?? null,
      created_at: at,
      updated_at: at,
    };
    return { row, user };
  }

  private async rowsByEmail(tenantId: string, email: string): Promise<UserRow[]> {
    if (this.database.sqlite) {
      this.byEmailStatement ??= this.database.sqlite.prepare<[string, string], UserRow>(
        'SELECT document, idp_tokens FROM users WHERE tenant_id = ? AND email = ? ORDER BY created_at, user_id',
      );
      return this.byEmailStatement.all(tenantId, email);
    }
    const result = await this.database.pool!.query<UserRow>({
      name: 'users_by_email',
      text: 'SELECT document, idp_tokens FROM users WHERE tenant_id = $1 AND email = $2 ORDER BY created_at, user_id',
      values: [tenantId, email],
    });
    return result.rows;
  }

  private present(row: UserRow, options: ReadOptions): Record<string, unknown> {
    const user = JSON.parse(row.document) as User;
    if (options.withIdpTokens && row.idp_tokens !== null) {
      const tokens = JSON.parse(this.secretBox.open(row.idp_tokens)) as IdpTokens[];
      user.identities = user.identities.map((identity, i) => ({ ...identity, ...tokens[i] }));
    }
    return project(user, options.fields, options.includeFields);
  }
}
