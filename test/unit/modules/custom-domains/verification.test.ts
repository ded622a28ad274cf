import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  TAKEN,
  afterVerify,
  awaitsApiKey,
  describeWindow,
  firstCheckAt,
  recheckDelay,
  recheckVerdict,
  verdict,
  type VerificationSchedule,
} from '../../../../src/modules/custom-domains/verification.ts';
import type { CustomDomainRow } from '../../../../src/modules/custom-domains/store.ts';

const HOUR = 3_600_000;
const created = '2026-03-12T09:00:00.000Z';
const after = (ms: number) => new Date(Date.parse(created) + ms);
const schedule: VerificationSchedule = { verifyWindowMs: 48 * HOUR, recheckInitialMs: 60_000, recheckMaxMs: HOUR };
const ok = { ok: true } as const;
const WINDOW = schedule.verifyWindowMs;
const pending = { status: 'pending_verification', created_at: created } as const;
const failed = { status: 'failed', created_at: created } as const;
const missing = { ok: false, error: 'No CNAME record found for login.example (ENOTFOUND)' } as const;

function row(members: Partial<CustomDomainRow> = {}): CustomDomainRow {
  return {
    id: 'cd_1',
    tenant_id: 't',
    domain: 'login.example',
    type: 'svc_managed_certs',
    status: 'pending_verification',
    is_primary: 1,
    verification_record: 'target.edge',
    verification_status: 'pending',
    verification_error: 'earlier',
    last_verified_at: null,
    custom_client_ip_header: null,
    tls_policy: 'recommended',
    domain_metadata: null,
    relying_party_identifier: null,
    cname_api_key_hash: null,
    created_at: created,
    next_check_at: after(60_000).toISOString(),
    check_count: 2,
    check_claimed_until: null,
    ...members,
  };
}

describe('verification verdict', () => {
  it('makes a domain ready on a successful check, stamped to the second', () => {
    const at = new Date('2026-03-12T10:11:12.345Z');
    assert.deepEqual(verdict(pending, ok, at, WINDOW), {
      status: 'ready',
      verification_status: 'verified',
      verification_error: null,
      last_verified_at: '2026-03-12T10:11:12Z',
    });
  });

  it('makes a failed domain ready again when its record appears, even after the window', () => {
    assert.equal(verdict(failed, ok, after(100 * HOUR), WINDOW).status, 'ready');
  });

  it('keeps a domain pending with the finding while the window is open', () => {
    assert.deepEqual(verdict(pending, missing, after(HOUR), WINDOW), {
      status: 'pending_verification',
      verification_status: 'pending',
      verification_error: missing.error,
    });
  });

  it('fails a domain once the window is over, saying how long it was', () => {
    const window = schedule.verifyWindowMs;
    assert.deepEqual(verdict(pending, missing, after(window), window), {
      status: 'failed',
      verification_status: 'failed',
      verification_error: `Verification did not succeed within 48 hours: ${missing.error}`,
    });
    assert.equal(
      verdict(pending, missing, after(window - 1), window).status,
      'pending_verification',
      'one millisecond before, still pending',
    );
  });

  it('keeps a failed domain failed on another failed check, within the window too', () => {
    assert.equal(verdict(failed, missing, after(1), WINDOW).status, 'failed');
  });

  it('states the window in the largest whole unit', () => {
    assert.equal(describeWindow(48 * HOUR), '48 hours');
    assert.equal(describeWindow(HOUR), '1 hour');
    assert.equal(describeWindow(10 * 60_000), '10 minutes');
    assert.equal(describeWindow(60_000), '1 minute');
    assert.equal(describeWindow(90_000), '90 seconds');
    assert.equal(describeWindow(1_000), '1 second');
  });
});

describe('background re-check schedule', () => {
  it('doubles the delay after each check, up to the maximum', () => {
    const delays = [0, 1, 2, 3, 4, 5, 6, 7].map((count) => recheckDelay(count, schedule));
    assert.deepEqual(delays, [60_000, 120_000, 240_000, 480_000, 960_000, 1_920_000, HOUR, HOUR]);
  });

  it('schedules the first check one initial delay after creation', () => {
    assert.equal(firstCheckAt(created, schedule), after(60_000).toISOString());
  });

  it('schedules the next check after a failed one, by the doubled delay', () => {
    const at = after(HOUR);
    const claim = { created_at: created, check_count: 2 };
    const { verdict: found, nextCheckAt } = recheckVerdict(claim, missing, at, schedule);
    assert.equal(found.status, 'pending_verification');
    assert.equal(nextCheckAt, new Date(at.getTime() + 480_000).toISOString());
  });

  it('never schedules a check after the window closes, so the last one fails the domain on time', () => {
    const at = after(schedule.verifyWindowMs - 1_000);
    const { nextCheckAt } = recheckVerdict({ created_at: created, check_count: 9 }, missing, at, schedule);
    assert.equal(nextCheckAt, after(schedule.verifyWindowMs).toISOString());
    const last = recheckVerdict({ created_at: created, check_count: 10 }, missing, after(WINDOW), schedule);
    assert.deepEqual([last.verdict.status, last.nextCheckAt], ['failed', null]);
  });

  it('takes a domain off the schedule once a check makes it ready', () => {
    const claim = { created_at: created, check_count: 0 };
    const { verdict: found, nextCheckAt } = recheckVerdict(claim, ok, after(1), schedule);
    assert.deepEqual([found.status, nextCheckAt], ['ready', null]);
  });
});

describe('a verify call on a domain not ready', () => {
  it('settles a ready verdict and takes the domain off the background schedule', () => {
    const changed = afterVerify(row({ check_claimed_until: 'lease' }), ok, false, after(1), WINDOW);
    assert.equal(changed.status, 'ready');
    assert.equal(changed.next_check_at, null);
    assert.equal(changed.check_claimed_until, null);
  });

  it('leaves a pending domain its place in the schedule', () => {
    const current = row({ check_claimed_until: 'lease' });
    const changed = afterVerify(current, missing, false, after(1), WINDOW);
    assert.equal(changed.status, 'pending_verification');
    assert.equal(changed.verification_error, missing.error);
    assert.equal(changed.next_check_at, current.next_check_at);
    assert.equal(changed.check_claimed_until, 'lease');
  });

  it('fails a domain whose hostname another tenant verified first, whatever DNS says', () => {
    const changed = afterVerify(row(), ok, true, after(1), WINDOW);
    assert.deepEqual(
      [changed.status, changed.verification_status, changed.verification_error, changed.next_check_at],
      [TAKEN.status, TAKEN.verification_status, TAKEN.verification_error, null],
    );
  });

  it('hands out a cname-api-key only for a ready self-managed domain that never had one', () => {
    assert.equal(awaitsApiKey(row({ type: 'self_managed_certs', status: 'ready' })), true);
    assert.equal(awaitsApiKey(row({ type: 'self_managed_certs', status: 'ready', cname_api_key_hash: 'h' })), false);
    assert.equal(awaitsApiKey(row({ type: 'self_managed_certs', status: 'pending_verification' })), false);
    assert.equal(awaitsApiKey(row({ type: 'svc_managed_certs', status: 'ready' })), false);
  });
});
