import type { Database, Tx } from '../../db/database.ts';
import { now, nowAfter, transaction } from '../../db/database.ts';
import { badRequest, notFound, userErrors } from '../../http/errors.ts';
import { project } from '../../http/projection.ts';
import { newId } from '../../ids.ts';
import type { SecretBox } from '../../secret-box.ts';
import type { ConnectionService } from '../connections/service.ts';
import { batchUsers, importBatchOf, type ImportBatch } from './import-batch.ts';
import { importRow, type ImportedUser, type ImportRow } from './imported-user.ts';
import { isTooWeak } from './password.ts';
import { PasswordHashing } from './password-hashing.ts';
import { UserStore, type StoredUser, type UserRecord } from './store.ts';
import {
  applyProfileChanges,
  buildUser,
  OWN_PROVIDER,
  OWN_PROVIDER_ALIASES,
  type IdpTokens,
  type Profile,
  type User,
} from './user.ts';

export type { ImportedUser } from './imported-user.ts';

export interface CreateUserInput extends Profile {
  connection: string;
  password?: string;
  user_id?: string;
  verify_email?: boolean;
}

export interface ReadOptions {
  fields: readonly string[];
  includeFields: boolean;
  withIdpTokens: boolean;
}

/** A user change as a webhook event: its payload is `{ object: <the user> }`. */
export interface UserEvent {
  tenantId: string;
  type: 'user.created' | 'user.updated' | 'user.deleted';
  data: { object: User };
}

/**
 * Where user changes are recorded as webhook events (the event streams' outbox): inside the change's
 * own transaction, so a change and its events commit or roll back together. Changes come in batches
 * (an import brings thousands at once), so they can be written in bulk.
 */
export interface UserEvents {
  record(trx: Tx, events: readonly UserEvent[]): Promise<void>;
}

/** What another module writes in a new user's insert transaction (its verification email), prepared before it opens. */
export type UserWrite = (trx: Tx) => Promise<unknown>;

/**
 * Given the new user before its insert transaction opens, does its slow work there (renders the
 * verification email) and returns what writes it in that transaction (the ticket and the outbox row).
 */
export type PrepareUserWrite = (user: User) => Promise<UserWrite | undefined>;

/** An import batch with a user_id, or an email in a connection, that is already taken: nothing of it is stored. */
export class DuplicateUsers extends Error {
  constructor() {
    super('a user with the same user_id, or the same email in the same connection, already exists');
  }
}

/** What one batch of an import job did; `refused` holds the records it did not store, by index in the batch. */
export interface ImportBatchResult {
  inserted: number;
  updated: number;
  refused: Array<{ index: number; code: string; message: string }>;
}

/**
 * Users. Every write records its webhook events (user.created, user.updated, user.deleted) through
 * `events`, in the write's own transaction. A new user may also carry a verification email: prepared
 * by the caller (see email-verification), written in the user's insert transaction.
 */
export class UserService {
  private readonly store: UserStore;
  private readonly hashing = new PasswordHashing();

  constructor(
    private readonly database: Database,
    private readonly connections: Pick<ConnectionService, 'byName'>,
    private readonly secretBox: SecretBox,
    private readonly events: UserEvents,
  ) {
    this.store = new UserStore(database);
  }

  /**
   * POST /users. `verificationEmail`, when the request asks for one, is given the new user before its
   * insert transaction opens; what it returns runs in that transaction, so the email (its ticket and
   * its outbox row) commits or rolls back with the user.
   */
  async create(tenantId: string, input: CreateUserInput, verificationEmail?: PrepareUserWrite): Promise<User> {
    const connection = await this.connections.byName(tenantId, input.connection);
    if (!connection) throw userErrors.inexistentConnection();
    if (!OWN_PROVIDER_ALIASES.has(connection.strategy)) throw userErrors.unsupportedStrategy(connection.strategy);
    if (input.email === undefined) throw badRequest.missingProperty('email');
    if (input.password === undefined) throw badRequest.missingProperty('password');
    if (isTooWeak(input.password)) throw userErrors.weakPassword();

    const {
      connection: connectionName,
      password,
      user_id: requestedId,
      verify_email: _verifyEmail,
      ...profile
    } = input;
    // The server is the identity provider here, so it stores the email lower-cased (spec section 1).
    profile.email = input.email.toLowerCase();
    const localId = requestedId ?? newId.userLocalId();
    const userId = `${OWN_PROVIDER}|${localId}`;
    const at = now();
    const user = buildUser(
      profile,
      [{ connection: connectionName, user_id: localId, provider: OWN_PROVIDER, isSocial: false }],
      userId,
      at,
    );
    const passwordHash = await this.hashing.hashFor(tenantId, password);
    const writeEmail = await verificationEmail?.(user);
    await transaction(this.database, async (trx) => {
      const record: UserRecord = {
        tenant_id: tenantId,
        user_id: userId,
        connection: connectionName,
        email: user.email ?? null,
        document: JSON.stringify(user),
        idp_tokens: null,
        password_hash: passwordHash,
        created_at: at,
        updated_at: at,
      };
      if (!(await this.store.insert(trx, record))) throw userErrors.exists();
      await this.events.record(trx, [event(tenantId, 'user.created', user)]);
      await writeEmail?.(trx);
    });
    return user;
  }

  /**
   * Every user of a tenant, a page at a time, as stored (without identity-provider tokens) with its
   * password hash: for `tenantry seed export`, which decides what of it to write.
   */
  async *all(tenantId: string): AsyncGenerator<{ user: User; passwordHash: string | null }> {
    let after: string | undefined;
    for (;;) {
      const rows = await this.store.page(tenantId, after, 500);
      for (const row of rows) yield { user: JSON.parse(row.document) as User, passwordHash: row.password_hash };
      if (rows.length < 500) return;
      after = rows[rows.length - 1]!.user_id;
    }
  }

  async get(tenantId: string, userId: string, options: ReadOptions): Promise<Record<string, unknown>> {
    const row = await this.store.get(tenantId, userId);
    if (!row) throw notFound.user();
    return this.present(row, options);
  }

  /** Idempotent, as the original: deleting a user that does not exist is not an error. */
  async delete(tenantId: string, userId: string): Promise<void> {
    await transaction(this.database, async (trx) => {
      const document = await this.store.delete(trx, tenantId, userId);
      if (document === undefined) return;
      await this.events.record(trx, [event(tenantId, 'user.deleted', JSON.parse(document) as User)]);
    });
  }

  /** PATCH /users/{id}: see applyProfileChanges. */
  async update(tenantId: string, userId: string, changes: Profile): Promise<User> {
    return transaction(this.database, async (trx) => {
      const locked = await this.lockUser(trx, tenantId, userId);
      if (!locked) throw notFound.user();
      const user = applyProfileChanges(locked.user, changes);
      // Another user of the connection may hold the new email already (a unique key per tenant and connection).
      if (!(await this.saveUpdated(trx, tenantId, userId, user, locked.updatedAt))) throw userErrors.emailTaken();
      return user;
    });
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
    // The email is unchanged, so no key can be taken.
    await this.saveUpdated(trx, tenantId, userId, user, updatedAt);
    return true;
  }

  private async lockUser(
    trx: Tx,
    tenantId: string,
    userId: string,
  ): Promise<{ user: User; updatedAt: string } | undefined> {
    const row = await this.store.lock(trx, tenantId, userId);
    return row && { user: JSON.parse(row.document) as User, updatedAt: row.updatedAt };
  }

  /**
   * Stores a changed user with an `updated_at` that moves forward, and records user.updated in the same
   * transaction; false (and nothing recorded) when its new email is taken.
   */
  private async saveUpdated(
    trx: Tx,
    tenantId: string,
    userId: string,
    user: User,
    previousUpdatedAt: string,
  ): Promise<boolean> {
    user.updated_at = nowAfter(previousUpdatedAt);
    const change = { document: JSON.stringify(user), email: user.email ?? null, updatedAt: user.updated_at };
    if (!(await this.store.update(trx, tenantId, userId, change))) return false;
    await this.events.record(trx, [event(tenantId, 'user.updated', user)]);
    return true;
  }

  /**
   * GET /users-by-email, the hot path: the store's prepared statement, answered as JSON text. Without
   * projection or tokens the stored documents are spliced into the array as they are, with no parse
   * and no re-serialisation.
   */
  async findByEmailJson(tenantId: string, email: string, options: ReadOptions): Promise<string> {
    const rows = await this.store.byEmail(tenantId, email);
    if (options.fields.length === 0 && !(options.withIdpTokens && rows.some((r) => r.idp_tokens !== null))) {
      return `[${rows.map((r) => r.document).join(',')}]`;
    }
    return JSON.stringify(rows.map((row) => this.present(row, options)));
  }

  /**
   * Bulk insert for seeds and tests: one transaction, user.created events included; returns how many
   * were inserted. A taken key throws DuplicateUsers and stores nothing.
   */
  async insertMany(tenantId: string, users: readonly ImportedUser[]): Promise<number> {
    return this.insertBatch(tenantId, importBatchOf(users, now()));
  }

  /**
   * A batch of the import command, its users built already (by the import's reading thread): one
   * transaction, its user.created events included; returns how many were inserted. A batch with a
   * taken key throws DuplicateUsers and stores nothing.
   */
  async insertBatch(tenantId: string, batch: ImportBatch): Promise<number> {
    const users = batchUsers(batch);
    // Each user is decoded and made a record as it is inserted, and the events are made after the
    // inserts: nothing of a user outlives its insert but what the batch brought. Records and events
    // made for the whole batch first lived through young-generation collections to the old
    // generation, which then grew by 100 MB between two full collections.
    const records = indexed(users.size, (i) => this.importedRecord(tenantId, users.row(i), batch.at));
    await transaction(this.database, async (trx) => {
      if (!(await this.store.insertMany(trx, records))) throw new DuplicateUsers();
      const events = Array.from({ length: users.size }, (_, i) => new CreatedEvent(tenantId, users, i));
      await this.events.record(trx, events);
    });
    return users.size;
  }

  /**
   * One batch of an import job, in the job's transaction (its progress commits with the batch). Each
   * record is inserted, or, when its user_id or its email in `connection` is taken, updated with the
   * record's profile when `upsert` is set and refused otherwise; a record repeating one earlier in the
   * batch is refused. Refusals are returned by index; the other records are stored, with their
   * user.created and user.updated events. Throws DuplicateUsers when a concurrent writer took a key
   * between the check and the insert: the caller retries the batch.
   */
  async importBatch(
    trx: Tx,
    tenantId: string,
    connection: string,
    records: readonly ImportedUser[],
    upsert: boolean,
  ): Promise<ImportBatchResult> {
    const at = now();
    const imported = records.map((record) =>
      this.importedRecord(tenantId, importRow({ ...record, connection }, at), at),
    );
    const userIds = records.flatMap((r, i) => (r.user_id === undefined ? [] : [imported[i]!.user_id]));
    const emails = imported.flatMap((record) => (record.email === null ? [] : [record.email]));
    const matches = await this.store.importMatches(trx, tenantId, connection, userIds, emails);
    const byId = new Map(matches.map((m) => [m.user_id, m]));
    const byEmail = new Map(matches.filter((m) => m.email !== null).map((m) => [m.email!, m]));
    const documents = { document: (index: number) => imported[index]!.document };
    const seen = new Set<string>();
    const inserts: UserRecord[] = [];
    const events: UserEvent[] = [];
    const result: ImportBatchResult = { inserted: 0, updated: 0, refused: [] };
    for (const [index, record] of imported.entries()) {
      const keys = [`id:${record.user_id}`, ...(record.email === null ? [] : [`email:${record.email}`])];
      if (keys.some((key) => seen.has(key))) {
        result.refused.push({ index, code: 'DUPLICATED_USER', message: 'The user is in the file more than once' });
        continue;
      }
      keys.forEach((key) => seen.add(key));
      const givenId = records[index]!.user_id !== undefined;
      const idMatch = givenId ? byId.get(record.user_id) : undefined;
      const emailMatch = record.email === null ? undefined : byEmail.get(record.email);
      const match = idMatch ?? emailMatch;
      if (!match) {
        inserts.push(record);
        events.push(new CreatedEvent(tenantId, documents, index));
        continue;
      }
      if (!upsert) {
        result.refused.push({
          index,
          code: 'DUPLICATED_USER',
          message: 'The user already exist and upsert parameter is false',
        });
        continue;
      }
      if (idMatch && emailMatch && idMatch.user_id !== emailMatch.user_id) {
        result.refused.push({
          index,
          code: 'DUPLICATED_USER',
          message: 'The user_id and the email belong to two different users',
        });
        continue;
      }
      const { user_id: _id, connection: _c, identities: _i, password_hash: passwordHash, ...profile } = records[index]!;
      const updated = applyProfileChanges(JSON.parse(match.document) as User, profile);
      updated.updated_at = nowAfter(match.updated_at);
      const change = {
        document: JSON.stringify(updated),
        email: updated.email ?? null,
        updatedAt: updated.updated_at,
        passwordHash,
      };
      if (!(await this.store.update(trx, tenantId, match.user_id, change))) throw new DuplicateUsers();
      events.push(event(tenantId, 'user.updated', updated));
      result.updated++;
    }
    if (inserts.length > 0 && !(await this.store.insertMany(trx, inserts))) throw new DuplicateUsers();
    result.inserted = inserts.length;
    await this.events.record(trx, events);
    return result;
  }

  /** For a process that only imports (the CLI command): lets the database cache more of the table. */
  prepareForImport(): void {
    this.store.widenCacheForImport();
  }

  /** An imported user as stored: in its tenant, stamped with its batch's time, its tokens sealed. */
  private importedRecord(tenantId: string, row: ImportRow, at: string): UserRecord {
    return {
      tenant_id: tenantId,
      user_id: row.user_id,
      connection: row.connection,
      email: row.email,
      document: row.document,
      idp_tokens: row.tokens === null ? null : this.secretBox.seal(row.tokens),
      password_hash: row.password_hash,
      created_at: at,
      updated_at: at,
    };
  }

  private present(row: StoredUser, options: ReadOptions): Record<string, unknown> {
    const user = JSON.parse(row.document) as User;
    if (options.withIdpTokens && row.idp_tokens !== null) {
      const tokens = JSON.parse(this.secretBox.open(row.idp_tokens)) as IdpTokens[];
      user.identities = user.identities.map((identity, i) => ({ ...identity, ...tokens[i] }));
    }
    return project(user, options.fields, options.includeFields);
  }
}

const event = (tenantId: string, type: UserEvent['type'], user: User): UserEvent => ({
  tenantId,
  type,
  data: { object: user },
});

/**
 * A new user's user.created event, its data parsed from the stored document when it is read: the
 * outbox reads an event's data only when a stream subscribes to its type, so an import into a tenant
 * without streams parses no document back. A class, its getter shared: an object literal with a
 * getter made two closures per event.
 */
class CreatedEvent implements UserEvent {
  readonly type = 'user.created';

  constructor(
    readonly tenantId: string,
    private readonly documents: { document(index: number): string },
    private readonly index: number,
  ) {}

  get data(): { object: User } {
    return { object: JSON.parse(this.documents.document(this.index)) as User };
  }
}

/** `item(0)`, `item(1)`… `item(count - 1)`, each made when it is reached. */
function* indexed<T>(count: number, item: (index: number) => T): Generator<T> {
  for (let i = 0; i < count; i++) yield item(i);
}
