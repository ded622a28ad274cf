import type { Selectable } from 'kysely';
import { isUniqueViolation, type Database } from '../../db/database.ts';
import type { SegmentsTable } from '../../db/schema.ts';

/** A stored segment: every column of the segments table (rules as JSON text). */
export type SegmentRecord = Selectable<SegmentsTable>;

/** What an update did: stored the new record, found no segment, or found the new name taken. */
export type UpdateOutcome = { kind: 'updated'; record: SegmentRecord } | { kind: 'absent' } | { kind: 'name_taken' };

/** Every query on the segments table, for both dialects. A name taken in the tenant is reported as a result. */
export class SegmentStore {
  constructor(private readonly database: Database) {}

  /** False when the tenant already has a segment of that name. */
  async insert(record: SegmentRecord): Promise<boolean> {
    try {
      await this.database.db.transaction().execute((trx) => trx.insertInto('segments').values(record).execute());
      return true;
    } catch (error) {
      if (isUniqueViolation(error)) return false;
      throw error;
    }
  }

  async get(tenantId: string, id: string): Promise<SegmentRecord | undefined> {
    return this.database.db
      .selectFrom('segments')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /** Up to `limit` segments in id order, after `afterId` when given, of `type` when given. */
  async list(
    tenantId: string,
    options: { afterId?: string; type?: SegmentsTable['type']; limit: number },
  ): Promise<SegmentRecord[]> {
    let query = this.database.db.selectFrom('segments').selectAll().where('tenant_id', '=', tenantId);
    if (options.afterId !== undefined) query = query.where('id', '>', options.afterId);
    if (options.type !== undefined) query = query.where('type', '=', options.type);
    return query.orderBy('id').limit(options.limit).execute();
  }

  /**
   * Reads the segment locked, hands it to `change` (which returns the new record, or throws), and stores
   * the result, in one transaction: concurrent updates then compute updated_at in turn. SQLite has no
   * row locks and needs none: its one connection runs transactions one after another.
   */
  async update(
    tenantId: string,
    id: string,
    change: (current: SegmentRecord) => SegmentRecord,
  ): Promise<UpdateOutcome> {
    try {
      return await this.database.db.transaction().execute(async (trx): Promise<UpdateOutcome> => {
        const current = await trx
          .selectFrom('segments')
          .selectAll()
          .where('tenant_id', '=', tenantId)
          .where('id', '=', id)
          .$if(this.database.dialect === 'postgres', (q) => q.forUpdate())
          .executeTakeFirst();
        if (!current) return { kind: 'absent' };
        const record = change(current);
        await trx
          .updateTable('segments')
          .set({
            name: record.name,
            description: record.description,
            rules: record.rules,
            updated_at: record.updated_at,
          })
          .where('tenant_id', '=', tenantId)
          .where('id', '=', id)
          .execute();
        return { kind: 'updated', record };
      });
    } catch (error) {
      if (isUniqueViolation(error)) return { kind: 'name_taken' };
      throw error;
    }
  }

  /**
   * Deletes the tenant's own ('self') segment of that id. Returns what was there: 'deleted', 'absent',
   * or the type of a segment that is not the tenant's to delete.
   */
  async deleteOwn(tenantId: string, id: string): Promise<'deleted' | 'absent' | 'svc'> {
    return this.database.db.transaction().execute(async (trx) => {
      const removed = await trx
        .deleteFrom('segments')
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .where('type', '=', 'self')
        .executeTakeFirst();
      if (removed.numDeletedRows > 0n) return 'deleted';
      const other = await trx
        .selectFrom('segments')
        .select('type')
        .where('tenant_id', '=', tenantId)
        .where('id', '=', id)
        .executeTakeFirst();
      return other ? 'svc' : 'absent';
    });
  }
}
