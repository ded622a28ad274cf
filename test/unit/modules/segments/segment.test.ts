import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeCursor } from '../../../../src/http/cursor.ts';
import { ApiError } from '../../../../src/http/errors.ts';
import { pageOf, toSegment, updatedRecord } from '../../../../src/modules/segments/segment.ts';
import type { SegmentRecord } from '../../../../src/modules/segments/store.ts';

const record = (id: string, overrides: Partial<SegmentRecord> = {}): SegmentRecord => ({
  tenant_id: 't',
  id,
  name: `name ${id}`,
  description: null,
  type: 'self',
  rules: JSON.stringify([{ match: { country: ['FR'] } }]),
  created_at: '2024-01-01T00:00:00.000Z',
  updated_at: '2024-01-01T00:00:00.000Z',
  ...overrides,
});

describe('toSegment', () => {
  it('parses the rules and omits an unset description', () => {
    const segment = toSegment(record('seg_1'));
    assert.deepEqual(segment.rules, [{ match: { country: ['FR'] } }]);
    assert.equal('description' in segment, false);
    assert.equal('tenant_id' in segment, false);
    assert.equal(toSegment(record('seg_1', { description: 'd' })).description, 'd');
  });
});

describe('updatedRecord', () => {
  it('replaces the members given, clears a null description, and moves updated_at forward', () => {
    const current = record('seg_1', { description: 'old', updated_at: '2999-01-01T00:00:00.000Z' });
    const changed = updatedRecord(current, { description: null, rules: [{ not_match: { country: ['DE'] } }] });
    assert.equal(changed.name, current.name);
    assert.equal(changed.description, null);
    assert.equal(changed.rules, JSON.stringify([{ not_match: { country: ['DE'] } }]));
    assert.equal(changed.updated_at, '2999-01-01T00:00:00.001Z');
  });

  it('refuses to change a segment the service provides', () => {
    assert.throws(
      () => updatedRecord(record('seg_1', { type: 'svc' }), { name: 'mine' }),
      (error) =>
        error instanceof ApiError && error.statusCode === 403 && error.message === 'Segment cannot be modified.',
    );
  });
});

describe('pageOf', () => {
  it('returns a cursor to the last id only when a record past the page was read', () => {
    const full = pageOf([record('seg_1'), record('seg_2'), record('seg_3')], 2);
    assert.deepEqual(
      full.segments.map((s) => s.id),
      ['seg_1', 'seg_2'],
    );
    assert.equal(
      decodeCursor(full.next!, () => true),
      'seg_2',
    );
    const last = pageOf([record('seg_1'), record('seg_2')], 2);
    assert.equal(last.segments.length, 2);
    assert.equal('next' in last, false);
    assert.deepEqual(pageOf([], 25), { segments: [] });
  });
});
