import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nextAttemptAt } from '../../../src/background/retry-schedule.ts';

const FROM = Date.parse('2025-03-01T12:00:00.000Z');
const after = (ms: number) => new Date(FROM + ms).toISOString();

describe('the retry schedule', () => {
  it('waits, after the n-th attempt, the n-th wait of the schedule', () => {
    assert.equal(nextAttemptAt([1_000, 5_000], 1, 0, FROM), after(1_000));
    assert.equal(nextAttemptAt([1_000, 5_000], 2, 0, FROM), after(5_000));
  });

  it('waits at least what the other side asked for', () => {
    assert.equal(nextAttemptAt([1_000], 1, 20_000, FROM), after(20_000));
    assert.equal(nextAttemptAt([1_000], 1, 10, FROM), after(1_000));
  });

  it('has no next attempt once the schedule is used up', () => {
    assert.equal(nextAttemptAt([1_000, 5_000], 3, 0, FROM), undefined);
    assert.equal(nextAttemptAt([], 1, 0, FROM), undefined);
  });

  it('counts from now unless told', () => {
    const before = Date.now();
    const at = Date.parse(nextAttemptAt([1_000], 1)!);
    assert.ok(at >= before + 1_000 && at <= Date.now() + 1_000);
  });
});
