import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  cooldownMs,
  disabledReason,
  runAfter,
  tally,
  type StreamRun,
  type Tally,
} from '../../../../../src/modules/event-streams/delivery/circuit.ts';

const AT = '2025-03-01T12:00:00.000Z';
const after = (ms: number) => new Date(Date.parse(AT) + ms).toISOString();
const rules = { openAfter: 3, cooldownMs: 1_000, disableAfter: 10 };
const stream = (run: number, openUntil: string | null = null, status: StreamRun['status'] = 'enabled'): StreamRun => ({
  consecutive_failures: run,
  circuit_open_until: openUntil,
  status,
});
const failures = (count: number, reset = false): Tally => ({ reset, failures: count, at: AT });

describe('counting a batch of attempts per stream', () => {
  it('counts the failures after the last success, and notes that one succeeded and when the last ended', () => {
    let counted: Tally | undefined;
    for (const [status, at] of [
      ['failed', 't1'],
      ['delivered', 't2'],
      ['failed', 't3'],
      ['failed', 't4'],
    ] as const) {
      counted = tally(counted, { attempt_status: status, at });
    }
    assert.deepEqual(counted, { reset: true, failures: 2, at: 't4' });
    assert.deepEqual(tally(undefined, { attempt_status: 'failed', at: 't1' }), { reset: false, failures: 1, at: 't1' });
  });
});

describe("a stream's run of failures and its circuit", () => {
  it('extends the run below the threshold, leaving the circuit closed', () => {
    assert.deepEqual(runAfter(stream(0), failures(2), rules), { run: 2, openUntil: null, disabled: false });
  });

  it('opens the circuit when the run reaches the threshold, for twice as long with each failure past it, 64 times at most', () => {
    assert.deepEqual(runAfter(stream(2), failures(1), rules), { run: 3, openUntil: after(1_000), disabled: false });
    assert.equal(runAfter(stream(4, after(-1)), failures(1), rules)?.openUntil, after(4_000));
    assert.equal(cooldownMs(rules, 3 + 6), 64_000);
    assert.equal(cooldownMs(rules, 3 + 20), 64_000);
  });

  it('does not extend an open circuit for failures of sends that began before it opened', () => {
    const open = after(500);
    assert.deepEqual(runAfter(stream(3, open), failures(2), rules), { run: 5, openUntil: open, disabled: false });
  });

  it('a success starts the run over and closes the circuit; failures after it count from zero', () => {
    assert.deepEqual(runAfter(stream(5, after(500)), failures(0, true), rules), {
      run: 0,
      openUntil: null,
      disabled: false,
    });
    assert.deepEqual(runAfter(stream(5, after(500)), failures(3, true), rules), {
      run: 3,
      openUntil: after(1_000),
      disabled: false,
    });
  });

  it('reports no change when neither the run nor the circuit moves', () => {
    assert.equal(runAfter(stream(0), failures(0, true), rules), undefined);
  });

  it('disables an enabled stream whose run reaches the limit, never with a limit of 0, and not one already disabled', () => {
    assert.equal(runAfter(stream(9, after(-1)), failures(1), rules)?.disabled, true);
    assert.equal(runAfter(stream(9, after(-1)), failures(1), { ...rules, disableAfter: 0 })?.disabled, false);
    assert.equal(runAfter(stream(9, after(-1), 'disabled'), failures(1), rules)?.disabled, false);
    assert.equal(disabledReason(10), 'Disabled after 10 consecutive failed delivery attempts.');
  });
});
