import { setTimeout as sleep } from 'node:timers/promises';
import { startWebhookReceiver } from '../test/helpers/webhook-receiver.ts';

/** How a receiver answers: 204 (after `delayMs`), 503 to everything, or never (reads the request and holds it). */
export type ReceiverMode = 'up' | 'unavailable' | 'hung';

/**
 * A real receiver on 127.0.0.1 that counts what it accepted. An event counts as delivered when the
 * receiver answered it 2xx; a 503 or a request held unanswered is not a delivery.
 */
export interface Tally {
  url: string;
  /** Times each event id was accepted. */
  accepted: Map<string, number>;
  /** Users whose user.created event was accepted. */
  users: Set<string>;
  /** Milliseconds from each event's `time` to its first acceptance. */
  latencies: number[];
  /** Requests of any outcome. */
  received(): number;
  /** Requests answered 503. */
  unavailable(): number;
  /** Requests held unanswered. */
  held(): number;
  mode(next: ReceiverMode): void;
  /**
   * The requests being answered at this moment (within their `delayMs`), and those arriving until
   * `done` settles, are held unanswered: what a process killed meanwhile had in flight is then accepted
   * only when it is sent again.
   */
  holdUntil(done: Promise<unknown>): void;
  close(): Promise<void>;
}

export async function startTally(options: { delayMs?: number; mode?: ReceiverMode } = {}): Promise<Tally> {
  const receiver = await startWebhookReceiver({ keep: false });
  let current: ReceiverMode = 'up';
  let received = 0;
  let unavailable = 0;
  let held = 0;
  let cuts = 0;
  const tally: Tally = {
    url: receiver.url,
    accepted: new Map(),
    users: new Set(),
    latencies: [],
    received: () => received,
    unavailable: () => unavailable,
    held: () => held,
    mode(next) {
      current = next;
      // The status is set right after the hook returns: the hook decides on `current` with no await in between.
      receiver.program([], next === 'unavailable' ? 503 : 204);
    },
    holdUntil(done) {
      cuts++;
      const before = current;
      tally.mode('hung');
      void done.finally(() => tally.mode(before));
    },
    close: () => receiver.close(),
  };
  tally.mode(options.mode ?? 'up');
  receiver.beforeAnswer(async (request) => {
    received++;
    const arrivedAfter = cuts;
    if (current === 'hung') {
      held++;
      return new Promise<void>(() => undefined);
    }
    if (options.delayMs) await sleep(options.delayMs);
    if (cuts !== arrivedAfter) {
      held++;
      return new Promise<void>(() => undefined);
    }
    if (current !== 'up') {
      unavailable++;
      return;
    }
    const event = request.json();
    const times = tally.accepted.get(event.id) ?? 0;
    tally.accepted.set(event.id, times + 1);
    if (times === 0) {
      tally.latencies.push(Date.now() - Date.parse(event.time));
      if (event.type === 'user.created') tally.users.add(event.data.object.user_id);
    }
  });
  return tally;
}

/** The `p`th percentile (0–100) of `values`, nearest rank; NaN when there are none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
