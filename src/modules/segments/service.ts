import type { Selectable } from 'kysely';
import type { Database } from '../../db/database.ts';
import { now, nowAfter, uniqueOr } from '../../db/database.ts';
import type { SegmentsTable } from '../../db/schema.ts';
import { ApiError, conflict } from '../../http/errors.ts';
import { idPattern, newId } from '../../ids.ts';
import { evaluateSegment, type Evaluation } from './evaluate.ts';
import type { CreateSegmentBody, Rule, SegmentType, SignInContext, UpdateSegmentBody } from './schema.ts';
import { decodeCursor, encodeCursor } from '../../http/cursor.ts';

export interface Segment {
  id: string;
  name: string;
  description?: string;
  type: SegmentType;
  rules: Rule[];
  created_at: string;
  updated_at: string;
}

export interface SegmentPage {
  segments: Segment[];
  next?: string;
}

export const segmentNotFound = () => new ApiError(404, 'Segment not found.', 'inexistent_segment');
const nameTaken = () => conflict('A segment with this name already exists.', 'segment_name_conflict');
/** Segments the service provides ('svc') are read-only, as the original's are. */
const readOnly = () => new ApiError(403, 'Segment cannot be modified.');

const DEFAULT_TAKE = 25;



function present(row: Selectable<SegmentsTable>): Segment {
  return {
    id: row.id,
    name: row.name,
    ...(row.description === null ? {} : { description: row.description }),
    type: row.type,
    rules: JSON.parse(row.rules) as Rule[],
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export class SegmentService {
  constructor(private readonly database: Database) {}

  async create(tenantId: string, input: CreateSegmentBody): Promise<Segment> {
    const at = now();
    const row: Selectable<SegmentsTable> = {
      tenant_id: tenantId,
      id: newId.segment(),
      name: input.name,
      description: input.description ?? null,
      type: 'self',
      rules: JSON.stringify(input.rules),
      created_at: at,
      updated_at: at,
    };
    await uniqueOr(this.database.db.transaction().execute((trx) => trx.insertInto('segments').values(row).execute()), nameTaken);
    return present(row);
  }

  async get(tenantId: string, id: string): Promise<Segment> {
    const row = await this.database.db
      .selectFrom('segments')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row) throw segmentNotFound();
    return present(row);
  }

  async list(tenantId: string, options: { from?: string; take?: number; type?: SegmentType }): Promise<SegmentPage> {
    const take = options.take ?? DEFAULT_TAKE;
    let query = this.database.db.selectFrom('segments').selectAll().where('tenant_id', '=', tenantId);
    if (options.from !== undefined) query = query.where('id', '>', decodeCursor(options.from, (id) => idPattern.segment.test(id)));
    if (options.type !== undefined) query = query.where('type', '=', options.type);
    // One row past the page tells whether there is a next page without a count.
    const rows = await query.orderBy('id').limit(take + 1).execute();
    const page = rows.slice(0, take);
    const last = page[page.length - 1];
    return { segments: page.map(present), ...(rows.length > take && last ? { next: encodeCursor(last.id) } : {}) };
  }

  async update(tenantId: string, id: string, input: UpdateSegmentBody): Promise<Segment> {
    return uniqueOr(
      this.database.db.transaction().execute(async (trx) => {
        const current = await trx
          .selectFrom('segments')
          .selectAll()
          .where('tenant_id', '=', tenantId)
          .where('id', '=', id)
          // Concurrent updates then compute updated_at in turn. SQLite has no row locks and needs none:
          // its one connection runs transactions one after another.
          .$if(this.database.dialect === 'postgres', (q) => q.forUpdate())
          .executeTakeFirst();
        if (!current) throw segmentNotFound();
        if (current.type === 'svc') throw readOnly();
        const changed: Selectable<SegmentsTable> = {
          ...current,
          ...(input.name === undefined ? {} : { name: input.name }),
          ...(input.description === undefined ? {} : { description: input.description }),
          ...(input.rules === undefined ? {} : { rules: JSON.stringify(input.rules) }),
          updated_at: nowAfter(current.updated_at),
        };
        await trx
          .updateTable('segments')
          .set({ name: changed.name, description: changed.description, rules: changed.rules, updated_at: changed.updated_at })
          .where('tenant_id', '=', tenantId)
          .where('id', '=', id)
          .execute();
        return present(changed);
      }),
      nameTaken,
    );
  }

  /** Idempotent, as the original: deleting a segment that does not exist is not an error. */
  async delete(tenantId: string, id: string): Promise<void> {
    await this.database.db.transaction().execute(async (trx) => {
      const removed = await trx.deleteFrom('segments').where('tenant_id', '=', tenantId).where('id', '=', id).where('type', '=', 'self').executeTakeFirst();
      if (removed.numDeletedRows > 0n) return;
      const other = await trx.selectFrom('segments').select('type').where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
      if (other) throw readOnly();
    });
  }

  async evaluate(tenantId: string, id: string, context: SignInContext): Promise<Evaluation> {
    const segment = await this.get(tenantId, id);
    return evaluateSegment(segment.rules, context);
  }
}
