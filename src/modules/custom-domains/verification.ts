import { randomBytes } from 'node:crypto';
import { customDomainError } from '../../http/errors.ts';
import { hashSecret } from '../../secret-hash.ts';
import type { Check, DnsCheck } from './dns-check.ts';
import { seconds, type CustomDomainRecords } from './record.ts';
import type { CustomDomainTest, VerifiedCustomDomain } from './schema.ts';
import {
  HostnameTaken,
  type CheckOutcome,
  type ClaimedCheck,
  type CustomDomainRow,
  type CustomDomainStore,
} from './store.ts';

/**
 * The verification state machine of a custom domain:
 *
 *   pending_verification ──check ok──▶ ready
 *         │  ▲ check failed, window open (background re-checks, each delay doubled up to a cap)
 *         │  └─┘
 *         └──check failed, window over──▶ failed ──verify, check ok──▶ ready
 *
 * and, from pending or failed, `failed` at once when another tenant's domain of the same hostname
 * became ready first (only a ready domain reserves its hostname). A ready self-managed domain hands
 * out its cname-api-key on the first verify call that finds it ready, and only then.
 *
 * The rules are the pure functions below; DomainVerification applies them to stored domains.
 */

/** How long a domain may stay pending, and how background re-checks are spaced meanwhile. */
export interface VerificationSchedule {
  /** Pending domains are re-checked in the background for this long after creation, then failed. */
  verifyWindowMs: number;
  /** Delay before the first background re-check; it doubles after each, up to recheckMaxMs. */
  recheckInitialMs: number;
  recheckMaxMs: number;
}

/** What a DNS check makes of a domain's status and verification members. */
export type Verdict = CheckOutcome;

/**
 * The verdict on a domain whose hostname another tenant's domain was verified for first: only a ready
 * domain reserves its hostname, so this one has lost it (until that domain is deleted).
 */
export const TAKEN: Verdict = {
  status: 'failed',
  verification_status: 'failed',
  verification_error: 'The domain is already verified by another tenant.',
};

/** `48 hours`, `10 minutes`, `5 seconds`: the window as the failure message states it. */
export function describeWindow(ms: number): string {
  const total = Math.round(ms / 1000);
  const [count, unit] =
    total % 3600 === 0 ? [total / 3600, 'hour'] : total % 60 === 0 ? [total / 60, 'minute'] : [total, 'second'];
  return `${count} ${unit}${count === 1 ? '' : 's'}`;
}

/**
 * Success makes a domain ready. A failure leaves it pending until its verification window has run
 * out; then, or when it had already failed, it is failed, with the last check's finding.
 */
export function verdict(
  domain: Pick<CustomDomainRow, 'status' | 'created_at'>,
  check: Check,
  at: Date,
  windowMs: number,
): Verdict {
  if (check.ok) {
    return {
      status: 'ready',
      verification_status: 'verified',
      verification_error: null,
      last_verified_at: seconds(at.toISOString()),
    };
  }
  if (domain.status === 'failed' || at.getTime() >= Date.parse(domain.created_at) + windowMs) {
    return {
      status: 'failed',
      verification_status: 'failed',
      verification_error: `Verification did not succeed within ${describeWindow(windowMs)}: ${check.error}`,
    };
  }
  return { status: 'pending_verification', verification_status: 'pending', verification_error: check.error };
}

/**
 * Wait before background check number `checkCount` (0 the first): the initial delay, doubled after
 * each, up to the maximum.
 */
export function recheckDelay(
  checkCount: number,
  schedule: Pick<VerificationSchedule, 'recheckInitialMs' | 'recheckMaxMs'>,
): number {
  return Math.min(schedule.recheckInitialMs * 2 ** checkCount, schedule.recheckMaxMs);
}

/** When the first background check of a domain created at `createdAt` falls due. */
export function firstCheckAt(createdAt: string, schedule: VerificationSchedule): string {
  return new Date(Date.parse(createdAt) + recheckDelay(0, schedule)).toISOString();
}

/**
 * What background check number `claim.check_count` (made at `at`) makes of a pending domain: its
 * verdict, and when the next check falls due — never after the window closes, so the last check
 * fails the domain on time — or null once the verdict settled it.
 */
export function recheckVerdict(
  claim: Pick<ClaimedCheck, 'created_at' | 'check_count'>,
  check: Check,
  at: Date,
  schedule: VerificationSchedule,
): { verdict: Verdict; nextCheckAt: string | null } {
  const pending = { status: 'pending_verification', created_at: claim.created_at } as const;
  const found = verdict(pending, check, at, schedule.verifyWindowMs);
  if (found.status !== 'pending_verification') return { verdict: found, nextCheckAt: null };
  const deadline = Date.parse(claim.created_at) + schedule.verifyWindowMs;
  const next = Math.min(at.getTime() + recheckDelay(claim.check_count + 1, schedule), deadline);
  return { verdict: found, nextCheckAt: new Date(next).toISOString() };
}

/** A self-managed domain that is ready but whose cname-api-key was never handed out. */
export const awaitsApiKey = (row: Pick<CustomDomainRow, 'type' | 'status' | 'cname_api_key_hash'>): boolean =>
  row.type === 'self_managed_certs' && row.status === 'ready' && row.cname_api_key_hash === null;

/**
 * A verify call's transition of a domain that is not ready: the verdict (TAKEN when the hostname is
 * ready elsewhere), out of the background schedule once settled; a pending one keeps its place in it.
 */
export function afterVerify(
  current: CustomDomainRow,
  check: Check,
  taken: boolean,
  at: Date,
  windowMs: number,
): CustomDomainRow {
  const found = taken ? TAKEN : verdict(current, check, at, windowMs);
  const settled = found.status !== 'pending_verification';
  return { ...current, ...found, ...(settled ? { next_check_at: null, check_claimed_until: null } : {}) };
}

/** What a verify call shows, and the hostname it made ready, if it did. */
export interface Verified {
  record: VerifiedCustomDomain;
  becameReady: string | undefined;
}

/** Applies the state machine to stored domains: verify calls and background re-checks. */
export class DomainVerification {
  constructor(
    private readonly store: CustomDomainStore,
    private readonly dns: DnsCheck,
    private readonly schedule: VerificationSchedule,
    private readonly records: CustomDomainRecords,
  ) {}

  /**
   * Checks DNS now; on success the domain is ready. A self-managed domain receives its cname-api-key
   * from the first verify that finds it ready (also when a background check made it so), and only then.
   */
  async verify(tenantId: string, id: string, given?: Check): Promise<Verified> {
    const before = await this.store.get(tenantId, id);
    if (before.status === 'ready' && !awaitsApiKey(before)) throw customDomainError.alreadyVerified();
    const check: Check = before.status === 'ready' ? { ok: true } : (given ?? (await this.dns.check(before)));
    const at = new Date();
    const outcome = await this.takenOnRace(
      id,
      this.store.transaction(async (trx) => {
        const current = await this.store.get(tenantId, id, trx, true);
        if (current.status === 'ready' && !awaitsApiKey(current)) throw customDomainError.alreadyVerified();
        let changed =
          current.status === 'ready'
            ? current
            : afterVerify(
                current,
                check,
                await this.store.readyElsewhere(trx, current),
                at,
                this.schedule.verifyWindowMs,
              );
        let apiKey: string | undefined;
        if (awaitsApiKey(changed)) {
          apiKey = randomBytes(64).toString('hex');
          changed = { ...changed, cname_api_key_hash: hashSecret(apiKey) };
        }
        await this.store.recordVerification(trx, id, {
          status: changed.status,
          verification_status: changed.verification_status,
          verification_error: changed.verification_error,
          last_verified_at: changed.last_verified_at,
          cname_api_key_hash: changed.cname_api_key_hash,
          next_check_at: changed.next_check_at,
          check_claimed_until: changed.check_claimed_until,
        });
        return { changed, apiKey };
      }),
    );
    const { changed: updated, apiKey } = outcome ?? { changed: await this.store.get(tenantId, id) };
    const record = await this.records.one(updated, undefined, { withDefault: false });
    return {
      record: apiKey === undefined ? record : { ...record, cname_api_key: apiKey },
      becameReady: before.status !== 'ready' && updated.status === 'ready' ? updated.domain : undefined,
    };
  }

  /**
   * POST …/{id}/test: whether a ready domain's DNS record still points where its verification found it,
   * as the original answers, `{success}` or `{success: false, message}` with the check's finding. A
   * domain not ready is the original's 409. Changes nothing: a failed test does not unverify the domain.
   */
  async test(tenantId: string, id: string): Promise<CustomDomainTest> {
    const domain = await this.store.get(tenantId, id);
    if (domain.status !== 'ready') throw customDomainError.notReady();
    const check = await this.dns.check(domain);
    return check.ok ? { success: true } : { success: false, message: check.error };
  }

  /**
   * One background re-check of a domain this node claimed: whether it made the domain ready. Its
   * outcome is recorded only while the domain is still pending and the claim still this node's: a
   * verify call meanwhile settles it first.
   */
  /** The domain's status after the check, and whether this check made it ready. */
  async recheck(claim: ClaimedCheck, leaseUntil: string): Promise<{ status: Verdict['status']; becameReady: boolean }> {
    const check = await this.dns.check(claim);
    const { verdict: found, nextCheckAt } = recheckVerdict(claim, check, new Date(), this.schedule);
    const recorded = await this.takenOnRace(
      claim.id,
      this.store.transaction(async (trx) => {
        const taken = await this.store.readyElsewhere(trx, claim);
        const updated = await this.store.recordRecheck(trx, claim.id, leaseUntil, {
          ...(taken ? TAKEN : found),
          next_check_at: taken ? null : nextCheckAt,
          check_count: claim.check_count + 1,
        });
        return { status: taken ? TAKEN.status : found.status, updated };
      }),
    );
    return {
      status: recorded?.status ?? TAKEN.status,
      becameReady: recorded?.status === 'ready' && recorded.updated,
    };
  }

  /**
   * What `settling` (the transaction recording a check of domain `id`) yields; when another tenant's
   * verification of the same hostname committed first, that transaction is undone, the domain
   * recorded as taken, and undefined yielded.
   */
  private async takenOnRace<T>(id: string, settling: Promise<T>): Promise<T | undefined> {
    try {
      return await settling;
    } catch (error) {
      if (!(error instanceof HostnameTaken)) throw error;
      await this.store.settleUnlessReady(id, TAKEN);
      return undefined;
    }
  }
}
