import { sql, type Kysely } from 'kysely';
import { isPostgres } from './dialect.ts';

/**
 * Users-import jobs: the job, the uploaded file in chunks (so that any node can resume the job after
 * the node that took the upload stopped), and the records the job could not import.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const postgres = await isPostgres(db);
  await db.schema
    .createTable('users_imports')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id').onDelete('cascade'))
    .addColumn('connection_id', 'text', (c) => c.notNull())
    .addColumn('connection', 'text', (c) => c.notNull())
    .addColumn('upsert', 'integer', (c) => c.notNull())
    .addColumn('external_id', 'text')
    .addColumn('send_completion_email', 'integer', (c) => c.notNull())
    .addColumn('format', 'text', (c) => c.notNull())
    .addColumn('file_bytes', 'bigint', (c) => c.notNull())
    .addColumn('total', 'integer', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('status_details', 'text')
    .addColumn('next_attempt_at', 'text', (c) => c.notNull())
    .addColumn('claimed_until', 'text')
    .addColumn('claims', 'integer', (c) => c.notNull())
    .addColumn('started_at', 'text')
    .addColumn('resume_offset', 'bigint', (c) => c.notNull())
    .addColumn('resume_position', 'integer', (c) => c.notNull())
    .addColumn('done', 'integer', (c) => c.notNull())
    .addColumn('inserted', 'integer', (c) => c.notNull())
    .addColumn('updated', 'integer', (c) => c.notNull())
    .addColumn('failed', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  // The import worker's claim: due jobs with work left.
  await db.schema.createIndex('users_imports_due').on('users_imports').columns(['status', 'next_attempt_at']).execute();

  // Written while the upload streams in, before its job row exists: no foreign key. Chunks whose job
  // never came (an upload refused or cut off) are swept by age.
  await db.schema
    .createTable('users_import_chunks')
    .addColumn('job_id', 'text', (c) => c.notNull())
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('data', postgres ? sql`bytea` : 'blob', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('users_import_chunks_pk', ['job_id', 'seq'])
    .execute();
  await db.schema.createIndex('users_import_chunks_created').on('users_import_chunks').column('created_at').execute();

  await db.schema
    .createTable('users_import_errors')
    .addColumn('job_id', 'text', (c) => c.notNull().references('users_imports.id').onDelete('cascade'))
    .addColumn('position', 'integer', (c) => c.notNull())
    .addColumn('record', 'text', (c) => c.notNull())
    .addColumn('errors', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('users_import_errors_pk', ['job_id', 'position'])
    .execute();
}
