import type { Selectable } from 'kysely';
import { claimDueRows } from '../../db/claim-due.ts';
import type { Database, Tx } from '../../db/database.ts';
import type { UsersImportErrorsTable, UsersImportsTable } from '../../db/schema.ts';

export type UsersImportRecord = Selectable<UsersImportsTable>;
export type UsersImportError = Selectable<UsersImportErrorsTable>;

/** A claimed job: its row, and the lease its batches are committed under. */
export type ClaimedImport = UsersImportRecord & { lease: string };

/** How a batch moves a job on: counters to add and the new resume point. */
export interface BatchProgress {
  resumeOffset: number;
  resumePosition: number;
  done: number;
  inserted: number;
  updated: number;
  failed: number;
}

const ALL_COLUMNS = [
  'id',
  'tenant_id',
  'connection_id',
  'connection',
  'upsert',
  'external_id',
  'send_completion_email',
  'format',
  'file_bytes',
  'total',
  'status',
  'status_details',
  'next_attempt_at',
  'claimed_until',
  'claims',
  'started_at',
  'resume_offset',
  'resume_position',
  'done',
  'inserted',
  'updated',
  'failed',
  'created_at',
  'updated_at',
] as const satisfies ReadonlyArray<keyof UsersImportRecord>;

/** Every query on users_imports, users_import_chunks and users_import_errors, for both dialects. */
export class UsersImportStore {
  constructor(private readonly database: Database) {}

  /** A chunk of an upload under way; written on its own, before the job exists (see sweepOrphanChunks). */
  async insertChunk(jobId: string, seq: number, data: Buffer, at: string): Promise<void> {
    await this.database.db
      .insertInto('users_import_chunks')
      .values({ job_id: jobId, seq, data, created_at: at })
      .execute();
  }

  /** The chunks of an upload that was refused. */
  async deleteChunks(jobId: string, trx?: Tx): Promise<void> {
    await (trx ?? this.database.db).deleteFrom('users_import_chunks').where('job_id', '=', jobId).execute();
  }

  /** Chunks older than `before` whose upload never became a job (refused, or cut off by a stopped node). */
  async sweepOrphanChunks(before: string): Promise<number> {
    const result = await this.database.db
      .deleteFrom('users_import_chunks')
      .where('created_at', '<', before)
      .where((eb) => eb.not(eb.exists(eb.selectFrom('users_imports').select('id').whereRef('id', '=', 'job_id'))))
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /** Up to `limit` chunks of a job from `fromSeq` on, in order. */
  async chunks(jobId: string, fromSeq: number, limit: number): Promise<Array<{ seq: number; data: Buffer }>> {
    const rows = await this.database.db
      .selectFrom('users_import_chunks')
      .select(['seq', 'data'])
      .where('job_id', '=', jobId)
      .where('seq', '>=', fromSeq)
      .orderBy('seq')
      .limit(limit)
      .execute();
    return rows.map((row) => ({ seq: row.seq, data: Buffer.from(row.data) }));
  }

  async insert(trx: Tx, record: UsersImportRecord): Promise<void> {
    await trx.insertInto('users_imports').values(record).execute();
  }

  /** The tenant's jobs not ended yet. */
  async countPending(tenantId: string, trx?: Tx): Promise<number> {
    const row = await (trx ?? this.database.db)
      .selectFrom('users_imports')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('status', '=', 'pending')
      .where('tenant_id', '=', tenantId)
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  async get(tenantId: string, id: string): Promise<UsersImportRecord | undefined> {
    return this.database.db
      .selectFrom('users_imports')
      .select(ALL_COLUMNS)
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /** The job's refused records in file order, after position `after`, at most `limit`. */
  async errors(jobId: string, after: number, limit: number): Promise<UsersImportError[]> {
    return this.database.db
      .selectFrom('users_import_errors')
      .selectAll()
      .where('job_id', '=', jobId)
      .where('position', '>', after)
      .orderBy('position')
      .limit(limit)
      .execute();
  }

  /** Claims due jobs with work left under a lease: pending ones, and those whose worker stopped. */
  async claimDue(leaseMs: number, limit: number): Promise<ClaimedImport[]> {
    return claimDueRows<UsersImportRecord>(
      this.database,
      { table: 'users_imports', key: 'id', returning: ALL_COLUMNS },
      { leaseMs },
      limit,
    );
  }

  /**
   * Counts a claim and marks the job started, if `lease` is still the job's; returns the claims so far,
   * or undefined when the lease was lost.
   */
  async markClaimed(id: string, lease: string, at: string): Promise<number | undefined> {
    const row = await this.database.db
      .updateTable('users_imports')
      .set((eb) => ({
        claims: eb('claims', '+', 1),
        started_at: eb.fn.coalesce('started_at', eb.val(at)),
        updated_at: at,
      }))
      .where('id', '=', id)
      .where('claimed_until', '=', lease)
      .returning('claims')
      .executeTakeFirst();
    return row?.claims;
  }

  /**
   * A batch's progress, in the batch's transaction, fenced by the lease: false (and the caller rolls
   * the batch back) when another worker holds the job now. The lease is renewed to `newLease`.
   */
  async recordBatch(
    trx: Tx,
    id: string,
    lease: string,
    newLease: string,
    progress: BatchProgress,
    at: string,
  ): Promise<boolean> {
    const result = await trx
      .updateTable('users_imports')
      .set((eb) => ({
        resume_offset: progress.resumeOffset,
        resume_position: progress.resumePosition,
        done: eb('done', '+', progress.done),
        inserted: eb('inserted', '+', progress.inserted),
        updated: eb('updated', '+', progress.updated),
        failed: eb('failed', '+', progress.failed),
        claimed_until: newLease,
        updated_at: at,
      }))
      .where('id', '=', id)
      .where('claimed_until', '=', lease)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /** Lets a job go before its lease runs out (a node stopping): the next claim resumes it at once. */
  async release(id: string, lease: string): Promise<void> {
    await this.database.db
      .updateTable('users_imports')
      .set({ claimed_until: null })
      .where('id', '=', id)
      .where('claimed_until', '=', lease)
      .execute();
  }

  async insertErrors(trx: Tx, rows: readonly UsersImportError[]): Promise<void> {
    if (rows.length > 0)
      await trx
        .insertInto('users_import_errors')
        .values([...rows])
        .execute();
  }

  /** Ends a job (completed or failed), fenced by the lease unless `lease` is null; its file goes with it. */
  async finish(
    trx: Tx,
    id: string,
    lease: string | null,
    outcome: { status: 'completed' | 'failed'; details: string | null },
    at: string,
  ): Promise<boolean> {
    const result = await trx
      .updateTable('users_imports')
      .set({ status: outcome.status, status_details: outcome.details, claimed_until: null, updated_at: at })
      .where('id', '=', id)
      .$if(lease !== null, (q) => q.where('claimed_until', '=', lease))
      .where('status', '=', 'pending')
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) !== 1) return false;
    await this.deleteChunks(id, trx);
    return true;
  }
}
