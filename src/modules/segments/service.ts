import type { Database } from '../../db/database.ts';
import { now } from '../../db/database.ts';
import { decodeCursor } from '../../http/cursor.ts';
import { segmentErrors } from '../../http/errors.ts';
import { idPattern, newId } from '../../ids.ts';
import { evaluateSegment, type Evaluation } from './evaluate.ts';
import {
  MAX_PATTERNS,
  patternCount,
  type CreateSegmentBody,
  type Rule,
  type SegmentType,
  type SignInContext,
  type UpdateSegmentBody,
} from './schema.ts';
import { pageOf, toSegment, updatedRecord, type Segment, type SegmentPage } from './segment.ts';
import { SegmentStore, type SegmentRecord } from './store.ts';

export type { Segment, SegmentPage } from './segment.ts';

const DEFAULT_TAKE = 25;

export class SegmentService {
  private readonly store: SegmentStore;

  constructor(database: Database) {
    this.store = new SegmentStore(database);
  }

  async create(tenantId: string, input: CreateSegmentBody): Promise<Segment> {
    checkPatterns(input.rules);
    const at = now();
    const record: SegmentRecord = {
      tenant_id: tenantId,
      id: newId.segment(),
      name: input.name,
      description: input.description ?? null,
      type: 'self',
      rules: JSON.stringify(input.rules),
      created_at: at,
      updated_at: at,
    };
    if (!(await this.store.insert(record))) throw segmentErrors.nameTaken();
    return toSegment(record);
  }

  async get(tenantId: string, id: string): Promise<Segment> {
    const record = await this.store.get(tenantId, id);
    if (!record) throw segmentErrors.notFound();
    return toSegment(record);
  }

  async list(tenantId: string, options: { from?: string; take?: number; type?: SegmentType }): Promise<SegmentPage> {
    const take = options.take ?? DEFAULT_TAKE;
    const afterId =
      options.from === undefined ? undefined : decodeCursor(options.from, (id) => idPattern.segment.test(id));
    const records = await this.store.list(tenantId, { afterId, type: options.type, limit: take + 1 });
    return pageOf(records, take);
  }

  async update(tenantId: string, id: string, input: UpdateSegmentBody): Promise<Segment> {
    if (input.rules !== undefined) checkPatterns(input.rules);
    const outcome = await this.store.update(tenantId, id, (current) => updatedRecord(current, input));
    if (outcome.kind === 'absent') throw segmentErrors.notFound();
    if (outcome.kind === 'name_taken') throw segmentErrors.nameTaken();
    return toSegment(outcome.record);
  }

  /** Idempotent, as the original: deleting a segment that does not exist is not an error. */
  async delete(tenantId: string, id: string): Promise<void> {
    if ((await this.store.deleteOwn(tenantId, id)) === 'svc') throw segmentErrors.readOnly();
  }

  async evaluate(tenantId: string, id: string, context: SignInContext): Promise<Evaluation> {
    const segment = await this.get(tenantId, id);
    return evaluateSegment(segment.rules, context);
  }
}

/** Refuses rules holding more than MAX_PATTERNS patterns, before anything is stored. */
function checkPatterns(rules: readonly Rule[]): void {
  const count = patternCount(rules);
  if (count > MAX_PATTERNS) throw segmentErrors.tooManyPatterns(count, MAX_PATTERNS);
}
