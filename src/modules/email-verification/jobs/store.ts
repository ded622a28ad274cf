import type { Selectable } from 'kysely';
import type { Database, Tx } from '../../../db/database.ts';
import type { JobsTable } from '../../../db/schema.ts';

/** A stored job: every column of the jobs table; a verification-email job points at its email. */
export type JobRecord = Selectable<JobsTable>;

/** Every query on the jobs table, for both dialects. */
export class JobStore {
  constructor(private readonly database: Database) {}

  async insert(trx: Tx, record: JobRecord): Promise<void> {
    await trx.insertInto('jobs').values(record).execute();
  }

  async get(tenantId: string, id: string): Promise<JobRecord | undefined> {
    return this.database.db
      .selectFrom('jobs')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
  }
}
