/**
 * Fault-injection scenarios against real `tenantry serve` processes, real databases and real
 * receivers on 127.0.0.1. Each creates users (every one a user.created event to a stream), injects a
 * fault mid-burst, lets the server recover, and counts what the receivers accepted. `npm run chaos`
 * runs them large (chaos/run.ts); test/chaos.test.ts runs them small.
 */
import pg from 'pg';
import { burst, createUser, newLedger, serverErrors, type Ledger, type Target } from './burst.ts';
import { fillUp, mountTmpfs, tmpfsUnavailable } from './full-disk.ts';
import { DELIVERY_ENV, hasExited, quiet, Rig, settle, SHORT_RETRY_SCHEDULE_MS, sleep, type Kind } from './rig.ts';
import { percentile, type Tally } from './tally.ts';
import { whereabouts } from './whereabouts.ts';
import { api, type ServerProcess } from '../test/helpers/server-process.ts';

export interface ChaosSize {
  /** Users created by a scenario's bursts, in all. */
  users: number;
  /** Requests in flight at once. */
  parallel: number;
  /** Longest wait for every acknowledged event to be delivered once the fault is over. */
  settleMs: number;
  /**
   * Users of the hung-endpoints scenario: each costs the hung streams four timed-out attempts, which
   * (until hung streams are kept from the healthy one's send slots) the healthy stream waits behind.
   */
  hungUsers: number;
}

export const SHORT: ChaosSize = { users: 24, parallel: 6, settleMs: 60_000, hungUsers: 16 };
export const LONG: ChaosSize = { users: 400, parallel: 16, settleMs: 180_000, hungUsers: 60 };

export interface ChaosResult {
  scenario: string;
  database: Kind;
  /** Users acknowledged with 201. */
  created: number;
  /** Distinct event ids the receivers accepted (events of users whose creation went unanswered included). */
  delivered: number;
  /** Acknowledged users whose user.created was never accepted: must be 0. */
  lost: number;
  /** Events accepted more than once (at-least-once allows it). */
  duplicated: number;
  seconds: number;
  /** Answers 500: a fault the server did not name (transient ones answer 503 with Retry-After). */
  internalErrors: number;
  /** The healthy stream's p99 delivery latency, in scenarios that have one (ms). */
  healthyP99Ms?: number;
  /** What else was seen: answers other than 201, latencies, error lines. */
  notes: string[];
}

export interface Scenario {
  name: string;
  databases: readonly Kind[];
  /** Why the scenario cannot run on this machine, if it cannot. */
  unavailable?(): string | undefined;
  run(kind: Kind, size: ChaosSize): Promise<ChaosResult>;
}

/** At most `max` of a server's distinct stderr lines, as notes. */
function stderrNotes(lines: string[], max = 3): string[] {
  const more = lines.length > max ? [`log: … ${lines.length - max} more distinct lines`] : [];
  return [...lines.slice(0, max).map((l) => `log: ${l}`), ...more];
}

async function result(
  rig: Rig,
  scenario: string,
  kind: Kind,
  started: number,
  ledger: Ledger,
  tally: Tally,
  notes: string[],
): Promise<ChaosResult> {
  const answers = [...ledger.answers].filter(([status]) => status !== '201').map(([status, n]) => `${n}× ${status}`);
  const samples = [...ledger.samples]
    .filter(([status]) => status.startsWith('5'))
    .map(([status, body]) => `${status}: ${body}`);
  const lost = [...ledger.created].filter((user) => !tally.users.has(user));
  return {
    scenario,
    database: kind,
    created: ledger.created.size,
    delivered: tally.accepted.size,
    lost: lost.length,
    duplicated: [...tally.accepted.values()].filter((n) => n > 1).length,
    seconds: (Date.now() - started) / 1000,
    internalErrors: ledger.answers.get('500') ?? 0,
    notes: [
      ...(answers.length > 0 ? [`answers other than 201: ${answers.join(', ')}`] : []),
      ...samples,
      ...notes,
      ...(await whereabouts(rig.database, lost.slice(0, 5))),
    ],
  };
}

/** Runs `body` on a fresh rig, closing it whatever happens. */
async function onRig<T>(kind: Kind, body: (rig: Rig) => Promise<T>): Promise<T> {
  const rig = await Rig.open(kind);
  try {
    return await body(rig);
  } finally {
    await rig.close();
  }
}

const one =
  (server: () => ServerProcess | undefined, token: string): Target =>
  () => {
    const current = server();
    return current ? { server: current, token } : undefined;
  };

/** The first `share` of `users`, at least one. */
const part = (users: number, share: number) => Math.max(1, Math.round(users * share));

/**
 * SIGKILL mid-burst, then a restart on the same database, and the rest of the burst on the new process.
 * Sends are in flight at the kill (the receiver answers after 50 ms), and the receiver accepts none of
 * those: they count as delivered only once the killed node's leases have run out and they are sent again.
 */
const sigkill: Scenario = {
  name: 'SIGKILL mid-burst, restart',
  databases: ['sqlite', 'postgres'],
  run: (kind, size) =>
    onRig(kind, async (rig) => {
      const started = Date.now();
      const tally = await rig.tally({ delayMs: 50 });
      let server: ServerProcess | undefined = await rig.start();
      const token = await rig.token(server);
      await rig.stream(server, token, 'chaos', tally.url);
      const ledger = newLedger();
      let killedAt = 0;
      const victim = server;
      const sent = await burst(ledger, {
        count: size.users,
        parallel: size.parallel,
        target: one(() => server, token),
        stop: () => killedAt > 0,
        after: () => {
          if (killedAt === 0 && ledger.created.size >= part(size.users, 0.4)) {
            killedAt = Date.now();
            server = undefined;
            tally.holdUntil(victim.kill());
          }
        },
      });
      if (killedAt === 0) throw new Error('the burst ended before the kill');
      await victim.exited;
      const restarted = await rig.start();
      server = restarted;
      await burst(ledger, { count: size.users - sent, parallel: size.parallel, target: one(() => server, token) });
      await settle(ledger, tally, size.settleMs);
      // The sends the kill cut off go again once their leases run out: wait for them, to count them.
      await sleep(Math.max(0, killedAt + Number(DELIVERY_ENV.DELIVERY_LEASE_MS) + 500 - Date.now()));
      await quiet(tally, 300, 10_000);
      return result(rig, sigkill.name, kind, started, ledger, tally, [
        `sends in flight at the kill (not accepted): ${tally.held()}`,
        ...stderrNotes(rig.errorLines([victim, restarted])),
      ]);
    }),
};

/**
 * Two nodes on one PostgreSQL database; one is killed mid-burst, the other takes all the traffic and
 * carries on delivering, and the killed one comes back. Sends in flight at the kill are not accepted.
 */
const twoNodes: Scenario = {
  name: 'two nodes, one SIGKILLed, restarted',
  databases: ['postgres'],
  run: (kind, size) =>
    onRig(kind, async (rig) => {
      const started = Date.now();
      const tally = await rig.tally({ delayMs: 50 });
      const nodes: Array<ServerProcess | undefined> = await Promise.all([rig.start(), rig.start()]);
      // Both nodes serve one tenant, whose signing keys are in the database: one token does for both.
      const token = await rig.token(nodes[0]!);
      await rig.stream(nodes[0]!, token, 'chaos', tally.url);
      const ledger = newLedger();
      let turn = 0;
      const target: Target = () => {
        const live = nodes.filter((n): n is ServerProcess => n !== undefined);
        const server = live[turn++ % live.length];
        return server ? { server, token } : undefined;
      };
      const victim = nodes[0]!;
      const survivor = nodes[1]!;
      let killedAt = 0;
      const first = part(size.users, 0.7);
      await burst(ledger, {
        count: first,
        parallel: size.parallel,
        target,
        after: () => {
          if (killedAt === 0 && ledger.created.size >= part(first, 0.4)) {
            killedAt = Date.now();
            nodes[0] = undefined;
            // As above: what is in flight at the kill is not accepted (the survivor's sends of that moment
            // wait out their timeout and go again).
            tally.holdUntil(victim.kill());
          }
        },
      });
      if (killedAt === 0) throw new Error('the burst ended before the kill');
      await victim.exited;
      if (await hasExited(survivor)) throw new Error('the surviving node exited');
      const restarted = await rig.start();
      nodes[0] = restarted;
      await burst(ledger, { count: size.users - first, parallel: size.parallel, target });
      await settle(ledger, tally, size.settleMs);
      await sleep(Math.max(0, killedAt + Number(DELIVERY_ENV.DELIVERY_LEASE_MS) + 500 - Date.now()));
      await quiet(tally, 300, 10_000);
      return result(rig, twoNodes.name, kind, started, ledger, tally, [
        `sends in flight at the kill (not accepted): ${tally.held()}`,
        ...stderrNotes(rig.errorLines([victim, survivor, restarted])),
      ]);
    }),
};

/** Ends every connection of the database's nodes (pooled ones and the LISTEN one); returns how many. */
async function terminateConnections(databaseUrl: string): Promise<number> {
  const admin = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
  await admin.connect();
  try {
    const ended = await admin.query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
      [new URL(databaseUrl).pathname.slice(1)],
    );
    return ended.rowCount ?? 0;
  } finally {
    await admin.end();
  }
}

/** PostgreSQL ends the node's connections twice mid-burst (as a restart or failover of the database would). */
const terminate: Scenario = {
  name: 'PostgreSQL connections terminated',
  databases: ['postgres'],
  run: (kind, size) =>
    onRig(kind, async (rig) => {
      const started = Date.now();
      const tally = await rig.tally({ delayMs: 5 });
      const server = await rig.start();
      const token = await rig.token(server);
      await rig.stream(server, token, 'chaos', tally.url);
      const ledger = newLedger();
      const at = [part(size.users, 0.3), part(size.users, 0.6)];
      const terminations: Array<Promise<number>> = [];
      await burst(ledger, {
        count: size.users,
        parallel: size.parallel,
        target: one(() => server, token),
        after: () => {
          if (terminations.length < at.length && ledger.created.size >= at[terminations.length]!) {
            terminations.push(terminateConnections(rig.database.databaseUrl!));
          }
        },
      });
      const ended = await Promise.all(terminations);
      if (await hasExited(server)) throw new Error('the node exited');
      if (ended.length < at.length || ended.some((n) => n === 0)) {
        throw new Error(`connections not ended mid-burst: ${JSON.stringify(ended)}`);
      }
      // The node serves again: one more user after the burst.
      await createUser(
        ledger,
        one(() => server, token),
      );
      await settle(ledger, tally, size.settleMs);
      await quiet(tally, 300, 10_000);
      return result(rig, terminate.name, kind, started, ledger, tally, [
        `connections ended: ${ended.join(' + ')}`,
        ...stderrNotes(rig.errorLines([server])),
      ]);
    }),
};

/** `YYYY-MM-DDTHH:MM:SSZ`: the redeliver window takes whole seconds. */
const wholeSecond = (ms: number) => new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');

/** The stream's failed deliveries, counted through the API's pages (at most 100 pages of 100). */
async function countFailed(server: ServerProcess, token: string, streamId: string): Promise<number> {
  let count = 0;
  let from = '';
  for (let page = 0; page < 100; page++) {
    const listed = await api(server, token, 'GET', `/event-streams/${streamId}/deliveries?take=100${from}`);
    if (listed.status !== 200) throw new Error(`deliveries answered ${listed.status} ${JSON.stringify(listed.body)}`);
    count += listed.body.deliveries.length;
    if (listed.body.next === undefined) break;
    from = `&from=${encodeURIComponent(listed.body.next)}`;
  }
  return count;
}

/**
 * The receiver answers 503 for a while: deliveries of that time exhaust their retries and fail.
 * Once it is back, POST …/redeliver with the scenario's window queues them again.
 */
const outage: Scenario = {
  name: 'receiver 503 outage, redeliver',
  databases: ['sqlite', 'postgres'],
  run: (kind, size) =>
    onRig(kind, async (rig) => {
      const started = Date.now();
      const tally = await rig.tally({ delayMs: 2 });
      // The circuit breaker would hold the outage's deliveries back until the receiver is up again, and
      // deliver them with no redelivery at all, and a long outage would disable the stream: both off here,
      // so that the outage's deliveries exhaust their retries and fail.
      const server = await rig.start({
        ...DELIVERY_ENV,
        DELIVERY_RETRY_SCHEDULE_MS: SHORT_RETRY_SCHEDULE_MS,
        DELIVERY_BREAKER_FAILURES: '1000000',
        DELIVERY_DISABLE_AFTER_CONSECUTIVE_FAILURES: '0',
      });
      const token = await rig.token(server);
      const streamId = await rig.stream(server, token, 'chaos', tally.url);
      const ledger = newLedger();
      const target = one(() => server, token);
      const third = part(size.users, 1 / 3);
      await burst(ledger, { count: third, parallel: size.parallel, target });
      tally.mode('unavailable');
      await burst(ledger, { count: third, parallel: size.parallel, target });
      // Longer than the retry schedule plus the attempts: the outage's deliveries fail for good.
      await sleep(1200);
      tally.mode('up');
      await burst(ledger, { count: size.users - 2 * third, parallel: size.parallel, target });
      const failed = await countFailed(server, token, streamId);
      if (failed === 0) throw new Error('no delivery failed during the outage: nothing to redeliver');
      const window = {
        date_from: wholeSecond(started),
        date_to: wholeSecond(Date.now() + 60_000),
        statuses: ['failed'],
        event_types: ['user.created'],
      };
      const redeliver = async () => {
        const answer = await api(server, token, 'POST', `/event-streams/${streamId}/redeliver`, window);
        if (answer.status !== 202)
          throw new Error(`redeliver answered ${answer.status} ${JSON.stringify(answer.body)}`);
      };
      let redeliveries = 0;
      const counted = async () => {
        redeliveries++;
        await redeliver();
      };
      await counted();
      // Deliveries still retrying at the first redelivery may fail after it: they are queued again.
      await settle(ledger, tally, size.settleMs, { ms: 1000, action: counted });
      await quiet(tally, 300, 10_000);
      return result(rig, outage.name, kind, started, ledger, tally, [
        `503 answered: ${tally.unavailable()}`,
        `failed before the redelivery: ${failed}`,
        `redeliver calls: ${redeliveries}`,
      ]);
    }),
};

/**
 * Two streams whose receivers read each request and never answer, beside a healthy stream, on a node
 * with 8 send slots: the hung streams alone could fill them (4 each). Sends time out after 1 s.
 */
const hung: Scenario = {
  name: 'hung endpoints beside a healthy one',
  databases: ['sqlite', 'postgres'],
  run: (kind, size) =>
    onRig(kind, async (rig) => {
      const started = Date.now();
      const healthy = await rig.tally();
      const stuck = [await rig.tally({ mode: 'hung' }), await rig.tally({ mode: 'hung' })];
      const server = await rig.start({
        ...DELIVERY_ENV,
        DELIVERY_RETRY_SCHEDULE_MS: SHORT_RETRY_SCHEDULE_MS,
        DELIVERY_CONCURRENCY: '8',
        DELIVERY_PER_STREAM_CONCURRENCY: '4',
      });
      const token = await rig.token(server);
      for (const [i, tally] of stuck.entries()) await rig.stream(server, token, `hung-${i}`, tally.url);
      await rig.stream(server, token, 'healthy', healthy.url);
      const ledger = newLedger();
      await burst(ledger, { count: size.hungUsers, parallel: size.parallel, target: one(() => server, token) });
      await settle(ledger, healthy, size.settleMs);
      const ms = (p: number) => `${Math.round(percentile(healthy.latencies, p))} ms`;
      const row = await result(rig, hung.name, kind, started, ledger, healthy, [
        `healthy stream latency p50 ${ms(50)}, p99 ${ms(99)}, max ${ms(100)}`,
        `requests held by the hung endpoints: ${stuck.map((t) => t.received()).join(' + ')}`,
      ]);
      return { ...row, healthyP99Ms: percentile(healthy.latencies, 99) };
    }),
};

/**
 * SQLite's DATA_DIR on an 8 MB tmpfs, filled up mid-burst; then the space is freed. Writes fail while
 * it is full (their answers are counted); none acknowledged may be lost, and the node must create users
 * again, by itself, once there is room.
 */
const fullDisk: Scenario = {
  name: 'full file system, then freed',
  databases: ['sqlite'],
  unavailable: tmpfsUnavailable,
  run: (kind, size) =>
    onRig(kind, async (rig) => {
      const started = Date.now();
      rig.defer(mountTmpfs(rig.database.dataDir));
      const tally = await rig.tally({ delayMs: 2 });
      const server = await rig.start();
      const token = await rig.token(server);
      await rig.stream(server, token, 'chaos', tally.url);
      const ledger = newLedger();
      const target = one(() => server, token);
      const third = part(size.users, 1 / 3);
      let filler: { bytes: number; free(): void } | undefined;
      await burst(ledger, {
        count: 2 * third,
        parallel: size.parallel,
        target,
        after: () => {
          if (!filler && ledger.created.size >= part(third, 1)) filler = fillUp(rig.database.dataDir);
        },
      });
      // The worker meets the full disk too: its records of sent deliveries fail while it lasts.
      await sleep(1000);
      if (!filler?.bytes) throw new Error('the file system was not filled');
      const whileFull = new Map(ledger.answers);
      filler.free();
      const freedAt = Date.now();
      // Recovered: a user is created again, within 20 s of the space coming back.
      const recoveryDeadline = freedAt + 20_000;
      while ((await createUser(ledger, target)) !== 'created') {
        if (Date.now() > recoveryDeadline) {
          throw new Error(`no user created within 20 s of freeing the space: ${JSON.stringify([...ledger.answers])}`);
        }
        await sleep(200);
      }
      const recoveredIn = Date.now() - freedAt;
      await burst(ledger, { count: size.users - 2 * third, parallel: size.parallel, target });
      await settle(ledger, tally, size.settleMs);
      await quiet(tally, 300, 10_000);
      if (await hasExited(server)) throw new Error('the node exited');
      return result(rig, fullDisk.name, kind, started, ledger, tally, [
        `filled with ${(filler.bytes / 1024).toFixed(0)} KiB; 5xx while full or just after: ${serverErrors(ledger)}`,
        `answers up to the freeing: ${JSON.stringify(Object.fromEntries(whileFull))}`,
        `first user created ${recoveredIn} ms after the space was freed`,
        ...stderrNotes(rig.errorLines([server])),
      ]);
    }),
};

export const scenarios: readonly Scenario[] = [sigkill, twoNodes, terminate, outage, hung, fullDisk];
