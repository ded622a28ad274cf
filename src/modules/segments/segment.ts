import { nowAfter } from '../../db/database.ts';
import { encodeCursor } from '../../http/cursor.ts';
import { segmentErrors } from '../../http/errors.ts';
import type { Rule, SegmentType, UpdateSegmentBody } from './schema.ts';
import type { SegmentRecord } from './store.ts';

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

/** A stored segment as the API returns it: rules parsed, an unset description omitted. */
export function toSegment(record: SegmentRecord): Segment {
  return {
    id: record.id,
    name: record.name,
    ...(record.description === null ? {} : { description: record.description }),
    type: record.type,
    rules: JSON.parse(record.rules) as Rule[],
    created_at: record.created_at,
    updated_at: record.updated_at,
  };
}

/**
 * PATCH: the members given replace the stored ones (a null description clears it), with an updated_at
 * that moves forward. Segments the service provides ('svc') are read-only, as the original's are.
 */
export function updatedRecord(current: SegmentRecord, input: UpdateSegmentBody): SegmentRecord {
  if (current.type === 'svc') throw segmentErrors.readOnly();
  return {
    ...current,
    ...(input.name === undefined ? {} : { name: input.name }),
    ...(input.description === undefined ? {} : { description: input.description }),
    ...(input.rules === undefined ? {} : { rules: JSON.stringify(input.rules) }),
    updated_at: nowAfter(current.updated_at),
  };
}

/**
 * A page of `take` segments out of the `take + 1` read: the one past the page only tells that there is
 * a next page (its cursor is the page's last id), without a count.
 */
export function pageOf(records: readonly SegmentRecord[], take: number): SegmentPage {
  const page = records.slice(0, take);
  const last = page[page.length - 1];
  return { segments: page.map(toSegment), ...(records.length > take && last ? { next: encodeCursor(last.id) } : {}) };
}
