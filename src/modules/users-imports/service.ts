import { Readable } from 'node:stream';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { ValidateFunction } from 'ajv';
import type { Database } from '../../db/database.ts';
import { now, transaction } from '../../db/database.ts';
import { payloadTooLarge, usersImportErrors } from '../../http/errors.ts';
import { renderPath, validationFailure, validatorCompiler } from '../../http/validation.ts';
import { LONE_SURROGATE_MESSAGE, loneSurrogateIn } from '../../lone-surrogates.ts';
import { newId } from '../../ids.ts';
import type { Logger } from '../../logger.ts';
import type { ConnectionService } from '../connections/service.ts';
import type { EventStreamService } from '../event-streams/service.ts';
import { DuplicateUsers, type UserService } from '../users/service.ts';
import { IDP_TOKEN_FIELDS, OWN_PROVIDER, OWN_PROVIDER_ALIASES } from '../users/user.ts';
import {
  FileFormatError,
  MAX_RECORD_DEPTH,
  nestingDepth,
  RecordSplitter,
  type FileFormat,
  type FileRecord,
} from './records.ts';
import {
  ImportedUserRecord,
  type UsersImportCreated,
  type UsersImportFailure,
  type UsersImportFields,
  type UsersImportJob,
} from './schema.ts';
import type { ClaimedImport, UsersImportError, UsersImportRecord, UsersImportStore } from './store.ts';

/** The uploaded file is stored in chunks of this size (the last one shorter): an offset names its chunk. */
export const CHUNK_BYTES = 1024 * 1024;
/** Records per transaction: each batch commits its users, its refusals and the job's progress together. */
const BATCH_RECORDS = 1000;
/**
 * …and characters of records per transaction: a record may be up to MAX_RECORD_BYTES, and a batch is
 * validated, stored and committed in one synchronous stretch on SQLite. 64 records of 1 MiB held the
 * event loop 1.25 s; a thousand would have held it for 20 s and a gigabyte of memory.
 */
const BATCH_CHARACTERS = 4 * 1024 * 1024;
/**
 * …and outbox rows per transaction: each user's user.created event makes a delivery for every stream
 * subscribed to it, so a batch writes records × streams rows. 1,000 records for 100 streams wrote
 * 100,000 in one transaction, 2 s of the event loop, batch after batch; the records of a batch are
 * fewer as the streams are more (at least one).
 */
const BATCH_OUTBOX_ROWS = 5_000;
/** Refused records kept for GET /jobs/{id}/errors; the summary counts every one. */
export const MAX_STORED_ERRORS = 10_000;
/** A job's refused records for GET /jobs/{id}/errors: none, or their JSON array as it is read. */
export type RefusedRecords = [] | Readable;

/**
 * Refused records read at a time for GET /jobs/{id}/errors, by bytes rather than by count: a stored
 * record may be up to a record's limit (1 MiB), and a page is held for as long as its reader takes to
 * read it, so a page of 32 such records held 140 MB for each client that stopped reading (thirty of
 * them, 4 GB). The first page asks for a few records; each next one for as many as fit in
 * ERRORS_PAGE_BYTES at the size seen so far, up to ERRORS_PAGE_MAX. A record is let go once written.
 */
const ERRORS_PAGE_FIRST = 4;
const ERRORS_PAGE_MAX = 256;
const ERRORS_PAGE_BYTES = 1024 * 1024;
/** Records written out are handed to the response in pieces of about this many characters. */
const ERRORS_PIECE = 64 * 1024;
/** A job claimed this many times without finishing (its node stopped each time) fails instead of looping. */
const MAX_CLAIMS = 5;
/** Jobs of one tenant not ended yet, as the original allows: one more is refused (429) until one ends. */
export const MAX_PENDING_PER_TENANT = 2;
/** Tries of one batch that a concurrent writer raced on a unique key. */
const BATCH_TRIES = 3;
/** Chunks read from the database at a time. */
const CHUNKS_PER_READ = 4;

export interface UsersImportSettings {
  /** Largest users file accepted, in bytes (USERS_IMPORT_MAX_BYTES). */
  maxBytes: number;
  /** How long a worker holds a job between two batches before another node may take it over. */
  leaseMs: number;
}

/** An upload stored in chunks, split into records and counted; its job is not created yet. */
export interface ReceivedFile {
  jobId: string;
  format: FileFormat;
  bytes: number;
  records: number;
}

/** The job lost its lease to another worker: its batch rolls back and this worker lets the job go. */
class LostLease extends Error {}

/** The stored file is not whole: no try will import it, so the job fails. */
class IncompleteFile extends Error {}

let recordValidator: ValidateFunction | undefined;

/**
 * Users-import jobs (POST /jobs/users-imports): the upload is stored in the database in chunks as it
 * streams in, so a job survives the node that received it; a worker on any node imports it in batches,
 * each one transaction with the job's progress, and resumes after the last committed batch when a node
 * stops mid-job. Records that are not valid users are refused one by one (GET /jobs/{id}/errors); the
 * others are imported.
 */
export class UsersImportService {
  /** Uploads being read on this node, per tenant: they count against MAX_PENDING_PER_TENANT. */
  private readonly uploading = new Map<string, number>();

  constructor(
    private readonly database: Database,
    private readonly store: UsersImportStore,
    private readonly connections: Pick<ConnectionService, 'byId'>,
    private readonly users: Pick<UserService, 'importBatch'>,
    private readonly events: Pick<EventStreamService, 'deliveriesPerEvent'>,
    private readonly settings: UsersImportSettings,
    private readonly logger: Logger,
    /** Tells this node's worker a job is waiting. */
    private readonly queued: () => void = () => {},
  ) {}

  get maxBytes(): number {
    return this.settings.maxBytes;
  }

  /** The tenant's uploads being read on this node now. */
  uploadsReading(tenantId: string): number {
    return this.uploading.get(tenantId) ?? 0;
  }

  /**
   * Refuses (429) a tenant that has MAX_PENDING_PER_TENANT jobs under way, counting its uploads still
   * being read on this node: asked before an upload is read, so a tenant cannot stream files side by side
   * past the limit (each may be USERS_IMPORT_MAX_BYTES). Returns the release of the upload's place, to
   * call once the upload became a job or was refused.
   */
  async reserveUpload(tenantId: string): Promise<() => void> {
    const uploading = this.uploading.get(tenantId) ?? 0;
    this.uploading.set(tenantId, uploading + 1);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      const left = (this.uploading.get(tenantId) ?? 1) - 1;
      if (left <= 0) this.uploading.delete(tenantId);
      else this.uploading.set(tenantId, left);
    };
    try {
      if (uploading + (await this.store.countPending(tenantId)) >= MAX_PENDING_PER_TENANT)
        throw usersImportErrors.tooManyPending(MAX_PENDING_PER_TENANT);
    } catch (error) {
      release();
      throw error;
    }
    return release;
  }

  /**
   * Stores the users file in chunks as it arrives, checking as it goes that it splits into JSON records
   * (a JSON array or NDJSON) and counting them. A file that is too large, not JSON, or empty is refused
   * whole: its chunks are removed and nothing else was written.
   */
  async receive(file: AsyncIterable<Buffer>): Promise<ReceivedFile> {
    const jobId = newId.job();
    const splitter = new RecordSplitter();
    const at = now();
    let bytes = 0;
    let records = 0;
    let seq = 0;
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    const check = (found: FileRecord[]) => {
      for (const record of found) {
        try {
          JSON.parse(record.text);
        } catch (error) {
          throw usersImportErrors.invalidFile(
            `record ${record.position} is not valid JSON (${(error as Error).message})`,
          );
        }
        if (nestingDepth(record.text) > MAX_RECORD_DEPTH)
          throw usersImportErrors.invalidFile(
            `record ${record.position} nests objects and arrays deeper than ${MAX_RECORD_DEPTH} levels`,
          );
      }
      records += found.length;
    };
    const flush = async (all: boolean) => {
      while (pendingBytes >= CHUNK_BYTES || (all && pendingBytes > 0)) {
        const joined = Buffer.concat(pending);
        const chunk = joined.subarray(0, CHUNK_BYTES);
        const rest = joined.subarray(chunk.length);
        await this.store.insertChunk(jobId, seq++, Buffer.from(chunk), at);
        pending = rest.length > 0 ? [rest] : [];
        pendingBytes = rest.length;
      }
    };
    try {
      for await (const data of file) {
        bytes += data.length;
        if (bytes > this.settings.maxBytes) throw payloadTooLarge(this.settings.maxBytes);
        check(splitter.push(data));
        pending.push(data);
        pendingBytes += data.length;
        await flush(false);
      }
      check(splitter.end());
      await flush(true);
    } catch (error) {
      await this.discard(jobId);
      if (error instanceof FileFormatError) throw usersImportErrors.invalidFile(error.message);
      throw error;
    }
    if (records === 0) {
      await this.discard(jobId);
      throw usersImportErrors.invalidFile('it holds no users');
    }
    return { jobId, format: splitter.fileFormat!, bytes, records };
  }

  /** Removes the chunks of an upload that will not become a job (a refused request). */
  async discard(jobId: string): Promise<void> {
    try {
      await this.store.deleteChunks(jobId);
    } catch (error) {
      // The sweep removes them later; the request's own error is what the client must see.
      this.logger.error({ err: error, job_id: jobId }, 'could not remove the chunks of a refused users file');
    }
  }

  /** Creates the job of a received file, pending; the worker takes it from there. */
  async create(tenantId: string, file: ReceivedFile, fields: UsersImportFields): Promise<UsersImportCreated> {
    const connection = await this.connections.byId(tenantId, fields.connection_id);
    if (!connection) throw usersImportErrors.inexistentConnection();
    if (!OWN_PROVIDER_ALIASES.has(connection.strategy))
      throw usersImportErrors.notDatabaseConnection(connection.strategy);
    const at = now();
    const record = pendingJob({
      id: file.jobId,
      tenantId,
      connection,
      file,
      fields,
      at,
    });
    await transaction(this.database, async (trx) => {
      // Asked again here: two uploads of one tenant may have passed assertRoom side by side.
      if ((await this.store.countPending(tenantId, trx)) >= MAX_PENDING_PER_TENANT)
        throw usersImportErrors.tooManyPending(MAX_PENDING_PER_TENANT);
      await this.store.insert(trx, record);
    });
    this.logger.info(
      { job_id: record.id, tenant_id: tenantId, records: file.records, bytes: file.bytes },
      'users import queued',
    );
    this.queued();
    const created: UsersImportCreated = {
      status: 'pending',
      type: 'users_import',
      created_at: at,
      id: record.id,
      connection_id: connection.id,
    };
    if (record.external_id !== null) created.external_id = record.external_id;
    return created;
  }

  /** The tenant's users-import job, or undefined (another tenant's too). */
  async get(tenantId: string, id: string): Promise<UsersImportJob | undefined> {
    const record = await this.store.get(tenantId, id);
    return record && present(record);
  }

  /**
   * GET /jobs/{id}/errors: the records a job refused, in file order (empty when none: the route answers
   * 204); a job that failed as a whole answers with itself, its status_details saying why.
   */
  async errors(tenantId: string, id: string): Promise<RefusedRecords | UsersImportJob | undefined> {
    const record = await this.store.get(tenantId, id);
    if (!record) return undefined;
    if (record.status === 'failed') return present(record);
    const first: Array<UsersImportError | undefined> = await this.store.errors(id, 0, ERRORS_PAGE_FIRST);
    if (first.length === 0) return [];
    const store = this.store;
    // The stored texts are the JSON written out: nothing is parsed again, and only a page is held.
    async function* pages(): AsyncGenerator<string> {
      let page = first;
      let limit = ERRORS_PAGE_FIRST;
      let separator = '[';
      for (;;) {
        let text = '';
        let bytes = 0;
        let last = 0;
        for (let i = 0; i < page.length; i++) {
          const row = page[i]!;
          page[i] = undefined;
          bytes += row.record.length + row.errors.length;
          last = row.position;
          text += `${separator}{"user":${row.record},"errors":${row.errors}}`;
          separator = ',';
          if (text.length >= ERRORS_PIECE) {
            yield text;
            text = '';
          }
        }
        if (text !== '') yield text;
        if (page.length < limit) break;
        const fit = Math.floor((page.length * ERRORS_PAGE_BYTES) / Math.max(bytes, 1));
        limit = Math.min(ERRORS_PAGE_MAX, Math.max(1, fit));
        page = await store.errors(id, last, limit);
        if (page.length === 0) break;
      }
      yield ']';
    }
    return Readable.from(pages(), { objectMode: false });
  }

  /** Claims up to `limit` due jobs for this worker. */
  async claim(limit: number): Promise<ClaimedImport[]> {
    return this.store.claimDue(this.settings.leaseMs, limit);
  }

  /** Removes the chunks of uploads that never became jobs, older than an hour. */
  async sweep(): Promise<void> {
    const removed = await this.store.sweepOrphanChunks(new Date(Date.now() - 3_600_000).toISOString());
    if (removed > 0)
      this.logger.info({ chunks: removed }, 'removed the chunks of users files whose upload did not finish');
  }

  /**
   * Runs a claimed job to its end from where it stopped: batch after batch, each committed with the
   * job's progress under its lease. Stops quietly when another worker took the job over (a lease that
   * ran out); `stopping` is asked between batches, so a node shutting down leaves the job to resume.
   */
  async run(job: ClaimedImport, stopping: () => boolean): Promise<void> {
    const claims = await this.store.markClaimed(job.id, job.lease, now());
    if (claims === undefined) return;
    const log = this.logger.child({ job_id: job.id, tenant_id: job.tenant_id });
    if (claims > MAX_CLAIMS) {
      await this.fail(job, job.lease, `The import stopped ${MAX_CLAIMS} times before it finished.`, log);
      return;
    }
    if (claims > 1) log.warn({ claims, resume_position: job.resume_position }, 'users import resumed');
    else log.info({ total: job.total }, 'users import started');
    let lease = job.lease;
    let failed = job.failed;
    const splitter = new RecordSplitter({
      format: job.format,
      end: job.resume_offset,
      position: job.resume_position,
    });
    let batch: FileRecord[] = [];
    let batchCharacters = 0;
    /** Read again before every batch: streams subscribed meanwhile count from the next batch. */
    const batchRecords = async () =>
      Math.max(
        1,
        Math.min(
          BATCH_RECORDS,
          Math.floor(BATCH_OUTBOX_ROWS / (await this.events.deliveriesPerEvent(job.tenant_id, 'user.created'))),
        ),
      );
    let recordsPerBatch = await batchRecords();
    /** Batches committed by this run (a resumed job counts from its resumption), for the operator's log. */
    let batches = 0;
    const commit = async () => {
      const outcome = await this.commitBatch(job, lease, batch, failed);
      batches++;
      lease = outcome.lease;
      failed += outcome.failed;
      batch = [];
      batchCharacters = 0;
      recordsPerBatch = await batchRecords();
      // SQLite's calls are synchronous: without a turn of the event loop between batches, a long import
      // would hold off every request until it ends.
      await yieldToEventLoop();
    };
    try {
      let expected = Math.floor(job.resume_offset / CHUNK_BYTES);
      let skip = job.resume_offset % CHUNK_BYTES;
      let read = expected * CHUNK_BYTES;
      for (;;) {
        const chunks = await this.store.chunks(job.id, expected, CHUNKS_PER_READ);
        for (const chunk of chunks) {
          if (chunk.seq !== expected) throw new IncompleteFile(`chunk ${expected} of the stored users file is missing`);
          expected++;
          read += chunk.data.length;
          for (const record of splitter.push(skip > 0 ? chunk.data.subarray(skip) : chunk.data)) {
            batch.push(record);
            batchCharacters += record.text.length;
            if (batch.length >= recordsPerBatch || batchCharacters >= BATCH_CHARACTERS) {
              await commit();
              if (stopping()) {
                // Another worker (this node's next start, or another node) resumes after this batch.
                await this.store.release(job.id, lease);
                log.info(
                  { done: job.done, resume_position: splitter.position },
                  'users import paused: the node is stopping',
                );
                return;
              }
            }
          }
          skip = 0;
        }
        if (chunks.length < CHUNKS_PER_READ) break;
      }
      if (read !== job.file_bytes)
        throw new IncompleteFile(`the stored users file holds ${read} of its ${job.file_bytes} bytes`);
      batch.push(...splitter.end());
      if (batch.length > 0) await commit();
      await transaction(this.database, async (trx) => {
        if (!(await this.store.finish(trx, job.id, lease, { status: 'completed', details: null }, now())))
          throw new LostLease();
      });
      const done = await this.store.get(job.tenant_id, job.id);
      log.info({ summary: done && summary(done), batches }, 'users import completed');
    } catch (error) {
      if (error instanceof LostLease) {
        log.warn('users import taken over by another worker (its lease ran out)');
        return;
      }
      if (isPermanent(error)) {
        await this.fail(job, lease, `The import failed: ${(error as Error).message}.`, log);
        return;
      }
      // The database or the node had a problem: the job resumes from its last batch when its lease runs out.
      throw error;
    }
  }

  private async fail(job: ClaimedImport, lease: string, details: string, log: Logger): Promise<void> {
    const failed = await transaction(this.database, (trx) =>
      this.store.finish(trx, job.id, lease, { status: 'failed', details }, now()),
    );
    if (failed) log.error({ status_details: details }, 'users import failed');
  }

  /**
   * One batch: every record checked against the bulk-import schema, the valid ones handed to the users
   * module, the refusals stored (up to MAX_STORED_ERRORS in all) and the job moved past the batch, in
   * one transaction under the lease, renewed.
   */
  private async commitBatch(
    job: ClaimedImport,
    lease: string,
    batch: readonly FileRecord[],
    failedBefore: number,
  ): Promise<{ lease: string; failed: number }> {
    recordValidator ??= validatorCompiler({ schema: ImportedUserRecord, httpPart: 'body' });
    const valid: Array<{ record: FileRecord; user: ImportedUserRecord }> = [];
    const schemaRefusals: Array<{ record: FileRecord; value: unknown; errors: UsersImportFailure['errors'] }> = [];
    let surrogateAt: string | undefined;
    for (const record of batch) {
      const value = JSON.parse(record.text) as unknown;
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        schemaRefusals.push({
          record,
          value,
          errors: [{ code: 'INVALID_TYPE', message: 'A user must be a JSON object', path: '' }],
        });
      } else if (!recordValidator(value)) {
        schemaRefusals.push({ record, value, errors: [validationFailure(recordValidator.errors ?? [])] });
      } else if ((surrogateAt = loneSurrogateIn(record.text, value)) !== undefined) {
        schemaRefusals.push({
          record,
          value,
          errors: [{ code: 'INVALID_FORMAT', message: LONE_SURROGATE_MESSAGE, path: renderPath(surrogateAt) }],
        });
      } else {
        valid.push({ record, user: value as ImportedUserRecord });
      }
    }
    const last = batch[batch.length - 1]!;
    for (let attempt = 1; ; attempt++) {
      const leaseUntil = new Date(Date.now() + this.settings.leaseMs).toISOString();
      try {
        return await transaction(this.database, async (trx) => {
          const result = await this.users.importBatch(
            trx,
            job.tenant_id,
            job.connection,
            // As the original, a given user_id is the id within the connection: the provider is prepended.
            valid.map(({ user }) =>
              user.user_id === undefined ? user : { ...user, user_id: `${OWN_PROVIDER}|${user.user_id}` },
            ),
            job.upsert === 1,
          );
          const refusals = [
            ...schemaRefusals.map((r) => ({ position: r.record.position, value: r.value, errors: r.errors })),
            ...result.refused.map((r) => ({
              position: valid[r.index]!.record.position,
              value: valid[r.index]!.user as unknown,
              errors: [{ code: r.code, message: r.message, path: '' }],
            })),
          ].sort((a, b) => a.position - b.position);
          const room = Math.max(0, MAX_STORED_ERRORS - failedBefore);
          const rows: UsersImportError[] = refusals.slice(0, room).map((r) => ({
            job_id: job.id,
            position: r.position,
            record: JSON.stringify(withoutSecrets(r.value)),
            errors: JSON.stringify(r.errors),
          }));
          await this.store.insertErrors(trx, rows);
          const progress = {
            resumeOffset: last.end,
            resumePosition: last.position,
            done: batch.length,
            inserted: result.inserted,
            updated: result.updated,
            failed: refusals.length,
          };
          if (!(await this.store.recordBatch(trx, job.id, lease, leaseUntil, progress, now()))) throw new LostLease();
          return { lease: leaseUntil, failed: refusals.length };
        });
      } catch (error) {
        // A concurrent writer took a key between the batch's check and its insert: the check sees it now.
        if (error instanceof DuplicateUsers && attempt < BATCH_TRIES) continue;
        throw error;
      }
    }
  }
}

/** A job as its upload leaves it: pending, nothing done yet. */
export function pendingJob(job: {
  id: string;
  tenantId: string;
  connection: { id: string; name: string };
  file: Pick<ReceivedFile, 'format' | 'bytes' | 'records'>;
  fields: Pick<UsersImportFields, 'upsert' | 'external_id' | 'send_completion_email'>;
  at: string;
}): UsersImportRecord {
  return {
    id: job.id,
    tenant_id: job.tenantId,
    connection_id: job.connection.id,
    connection: job.connection.name,
    upsert: job.fields.upsert ? 1 : 0,
    external_id: job.fields.external_id ?? null,
    send_completion_email: job.fields.send_completion_email === false ? 0 : 1,
    format: job.file.format,
    file_bytes: job.file.bytes,
    total: job.file.records,
    status: 'pending',
    status_details: null,
    next_attempt_at: job.at,
    claimed_until: null,
    claims: 0,
    started_at: null,
    resume_offset: 0,
    resume_position: 0,
    done: 0,
    inserted: 0,
    updated: 0,
    failed: 0,
    created_at: job.at,
    updated_at: job.at,
  };
}

/**
 * Members that hold credentials, wherever they appear in a record: the hash this import takes, what
 * other providers' exports carry (the original's `custom_password_hash`, MFA enrolments with their TOTP
 * secrets, a plain password), and identity providers' tokens (`identities[].access_token`, …), which
 * the API otherwise shows only to read:user_idp_tokens. Records holding them are refused (unknown
 * members), and must not bring them back in /errors, which a client with read:users alone may read.
 */
const SECRET_MEMBERS: ReadonlySet<string> = new Set([
  'password_hash',
  'custom_password_hash',
  'password',
  'mfa_factors',
  ...IDP_TOKEN_FIELDS,
]);

/**
 * What a refused record shows in /errors: the record as given, without the members holding credentials.
 * A record that is not an object (an array of users, say) is shown as `{ value }`, stripped the same way.
 */
function withoutSecrets(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return { value: withoutSecretMembers(value) };
  return withoutSecretMembers(value);
}

/**
 * The value with every member named in SECRET_MEMBERS left out, at any depth (a record nests at most 100
 * levels: deeper ones refuse the file at upload). Copied into objects without a prototype, so that a
 * member named `__proto__` stays a member.
 */
function withoutSecretMembers(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutSecretMembers);
  if (typeof value !== 'object' || value === null) return value;
  const kept: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const [name, member] of Object.entries(value)) {
    if (!SECRET_MEMBERS.has(name)) kept[name] = withoutSecretMembers(member);
  }
  return kept;
}

/** Failures that another try would meet again: the job fails, visibly, instead of looping. */
function isPermanent(error: unknown): boolean {
  return (
    error instanceof FileFormatError ||
    error instanceof IncompleteFile ||
    error instanceof DuplicateUsers ||
    error instanceof SyntaxError
  );
}

function summary(record: UsersImportRecord) {
  return { failed: record.failed, updated: record.updated, inserted: record.inserted, total: record.total };
}

/** The job as GET /jobs/{id} answers it, in the original's key order. */
function present(record: UsersImportRecord): UsersImportJob {
  const processing = record.status === 'pending' && record.started_at !== null;
  const job: UsersImportJob = {
    status: processing ? 'processing' : record.status,
    type: 'users_import',
    created_at: record.created_at,
    id: record.id,
    connection_id: record.connection_id,
    connection: record.connection,
  };
  if (record.external_id !== null) job.external_id = record.external_id;
  if (processing && record.total > 0) {
    job.percentage_done = Math.floor((record.done / record.total) * 100);
    const seconds = (Date.parse(record.updated_at) - Date.parse(record.started_at!)) / 1000;
    if (record.done > 0 && seconds > 0)
      job.time_left_seconds = Math.ceil(((record.total - record.done) * seconds) / record.done);
  }
  if (record.status === 'failed' && record.status_details !== null) job.status_details = record.status_details;
  if (record.status !== 'pending') job.summary = summary(record);
  return job;
}
