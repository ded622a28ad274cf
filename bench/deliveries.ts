/**
 * Event delivery (the webhook outbox), three benchmarks; the webhook endpoint is bench/receiver.ts.
 *
 *  delivery-throughput  deliveries per second from an outbox backlog (rows inserted directly, one
 *                       event per BENCH_DELIVERY_STREAMS streams) to a receiver answering 204: SQLite
 *                       with one node, PostgreSQL with two nodes sharing the work. Baseline: the
 *                       receiver's own rate under autocannon POSTing the same envelope bytes, with
 *                       as many connections as a node has deliveries in flight.
 *  delivery-latency     from POST /api/v2/users (sent) to receipt of its user.created event, p50/p99,
 *                       at BENCH_LATENCY_RATE (10) users/s for 10 s, SQLite and PostgreSQL (two
 *                       nodes, the users created on both). Baseline: the POST's own latency.
 *  redelivery           time to queue 100,000 failed deliveries again (POST …/redeliver {}), on a
 *                       node without a worker: until it answers (the first chunk) and until the rest is
 *                       queued in the background, with another stream read every 50 ms meanwhile.
 *                       Baseline: one UPDATE of the same rows back to failed; the probe before.
 *                       BENCH_REDELIVER sets the number, BENCH_REDELIVER_DATABASES (sqlite,postgres)
 *                       the databases, BENCH_REDELIVER_LANES the node's EVENT_STREAM_REDELIVERY_LANES
 *                       (its default for the database unless set); BENCH_REDELIVER_LATER=1 adds one
 *                       failure a day after the rest, as an outage's failures and a later one lie.
 *  (also claim-growth, stats-growth and deletion-stall, described at their functions below)
 *
 * PostgreSQL parts run on a fresh database on BENCH_DATABASE_URL's server (default
 * postgres://postgres@127.0.0.1:5432/postgres), dropped afterwards; skipped when none answers.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { DEFAULT_TENANT_ID } from '../src/bootstrap.ts';
import { openDatabase, type Database } from '../src/db/database.ts';
import type { DeliveriesTable, DeliveryAttemptsTable, EventsTable } from '../src/db/schema.ts';
import { newId } from '../src/ids.ts';
import { envelope, sourceFor } from '../src/modules/event-streams/envelope.ts';
import {
  claimDue,
  POSTGRES_WALK_CLAIM as CLAIM_STATEMENT_FOR_EXPLAIN,
} from '../src/modules/event-streams/store/claim.ts';
import {
  fmt,
  generatedUser,
  HOST,
  load,
  mean,
  readCpuMs,
  readRss,
  spawnChild,
  spawnServer,
  table,
  tempDir,
  TENANT_DOMAIN,
  verdict,
  type Child,
} from './lib.ts';

const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 20_000);
const STREAMS = Number(process.env.BENCH_DELIVERY_STREAMS ?? 8);
/**
 * Users created per second. Each creation hashes its password (scrypt, ~56 ms of CPU on the reference
 * machine), so 20/s already takes more than one of its two cores: 10/s keeps the load light.
 */
const LATENCY_RATE = Number(process.env.BENCH_LATENCY_RATE ?? 10);
const LATENCY_SECONDS = 10;
const REDELIVER = Number(process.env.BENCH_REDELIVER ?? 100_000);
const REDELIVER_DATABASES = (process.env.BENCH_REDELIVER_DATABASES ?? 'sqlite,postgres').split(',') as Array<
  'sqlite' | 'postgres'
>;
const REDELIVER_LANES = process.env.BENCH_REDELIVER_LANES;
/** One more failed delivery, a day after the rest: the failures bunched in time, as an outage leaves them. */
const REDELIVER_LATER = process.env.BENCH_REDELIVER_LATER === '1';
const ADMIN_DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
/** A node's deliveries in flight (DELIVERY_CONCURRENCY's default), and so the baseline's connections. */
const CONCURRENCY = 32;
/** The longest one backlog, or one latency run, may take before it is reported as it stands. */
const RUN_LIMIT_MS = 120_000;
const WEBHOOK_TOKEN = 'bench-webhook-token';
const ROUNDS = 2;

type Node = Child & { port: number; token: string };

const wallClock = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// Nodes, databases and the receiver

interface Backend {
  /** "SQLite, 1 node" or "PostgreSQL, 2 nodes". */
  name: string;
  nodes: Node[];
  /** The benchmark's own handle on the nodes' database, for fixtures and checks. */
  database: Database;
  close(): Promise<void>;
}

/**
 * Starts `nodeCount` Tenantry nodes on a new database: SQLite in a temp DATA_DIR, or a fresh
 * PostgreSQL database (undefined when no PostgreSQL server answers). Nodes start one after the
 * other, so only the first migrates and bootstraps.
 */
async function startBackend(
  kind: 'sqlite' | 'postgres',
  nodeCount: number,
  env: Record<string, string> = {},
): Promise<Backend | undefined> {
  const work = tempDir(`deliveries-${kind}`);
  let databaseUrl = '';
  let drop = async () => {};
  if (kind === 'postgres') {
    const name = `tenantry_bench_${randomBytes(6).toString('hex')}`;
    const admin = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
    try {
      await admin.connect();
      await admin.query(`CREATE DATABASE ${name}`);
    } catch (error) {
      process.stdout.write(`  PostgreSQL skipped: ${ADMIN_DATABASE_URL} did not answer (${String(error)})\n`);
      work.remove();
      return undefined;
    } finally {
      await admin.end().catch(() => undefined);
    }
    const url = new URL(ADMIN_DATABASE_URL);
    url.pathname = `/${name}`;
    databaseUrl = url.toString();
    drop = async () => {
      const client = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    };
  }
  const nodes: Node[] = [];
  let database: Database | undefined;
  const close = async () => {
    await database?.close();
    for (const node of nodes) await node.stop();
    await drop();
    work.remove();
  };
  try {
    const dataDir = path.join(work.dir, 'data');
    // Every node of one deployment shares the key that seals the webhooks' secrets.
    const shared = {
      DATABASE_URL: databaseUrl,
      ENCRYPTION_KEY: randomBytes(32).toString('hex'),
      DELIVERY_ALLOW_HTTP: 'true',
      ...env,
    };
    for (let i = 0; i < nodeCount; i++) nodes.push(await spawnServer(dataDir, shared));
    database = openDatabase({ dataDir, ...(databaseUrl ? { databaseUrl } : {}) });
    const name = `${kind === 'sqlite' ? 'SQLite' : 'PostgreSQL'}, ${nodeCount} node${nodeCount > 1 ? 's' : ''}`;
    return { name, nodes, database, close };
  } catch (error) {
    await close();
    throw error;
  }
}

interface Receiver extends Child {
  port: number;
  stats(): Promise<{ count: number; distinct: number; connections: number; first: number; last: number }>;
  received(): Promise<Array<{ id: string; eventTime: number; email: string | undefined; at: number }>>;
  reset(): Promise<void>;
}

async function startReceiver(record: boolean): Promise<Receiver> {
  const child = await spawnChild('receiver.ts', record ? ['record'] : []);
  const port = child.ready.port as number;
  const base = `http://${HOST}:${port}/bench`;
  return Object.assign(child, {
    port,
    stats: async () => (await fetch(`${base}/stats`)).json() as ReturnType<Receiver['stats']>,
    received: async () => (await fetch(`${base}/received`)).json() as ReturnType<Receiver['received']>,
    reset: async () => void (await fetch(`${base}/reset`, { method: 'POST' })).arrayBuffer(),
  });
}

async function api(
  node: Node,
  method: string,
  pathAndQuery: string,
  body?: unknown,
): Promise<{ status: number; body: any }> {
  const response = await fetch(`http://${HOST}:${node.port}${pathAndQuery}`, {
    method,
    headers: {
      authorization: `Bearer ${node.token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

/** Streams subscribed to user.created, each POSTing to its own path of the receiver. */
async function createStreams(node: Node, receiverPort: number, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const created = await api(node, 'POST', '/api/v2/event-streams', {
      name: `bench-${i}`,
      subscriptions: [{ event_type: 'user.created' }],
      destination: {
        type: 'webhook',
        configuration: {
          webhook_endpoint: `http://${HOST}:${receiverPort}/hook/${i}`,
          webhook_authorization: { method: 'bearer', token: WEBHOOK_TOKEN },
        },
      },
    });
    if (created.status !== 201)
      throw new Error(`creating a stream failed: ${created.status} ${JSON.stringify(created.body)}`);
    ids.push(created.body.id as string);
  }
  return ids;
}

// ---------------------------------------------------------------------------------------------
// Fixtures: outbox rows written directly, as the users service's transaction would write them

let fixtureCounter = 0;

/** A user.created event shaped as the server writes one (a user document of ~600 bytes). */
function fixtureEvent(at: string): EventsTable {
  const i = fixtureCounter++;
  const localId = `${(0x65000000 + i).toString(16)}0000000000000000`.slice(0, 24);
  const user = {
    ...generatedUser(i),
    user_id: `svc|${localId}`,
    nickname: `user${i}`,
    picture: `https://s.gravatar.com/avatar/${localId}?s=480&r=pg&d=https%3A%2F%2Fcdn.example%2Favatars%2Fgf.png`,
    identities: [
      { connection: 'Username-Password-Authentication', user_id: localId, provider: 'svc', isSocial: false },
    ],
    created_at: at,
    updated_at: at,
  };
  return {
    id: newId.event(),
    tenant_id: DEFAULT_TENANT_ID,
    type: 'user.created',
    time: at,
    source: sourceFor(TENANT_DOMAIN),
    data: JSON.stringify({ object: user }),
    purpose: null,
  };
}

const ROWS_PER_INSERT = 1000;

async function insertRows<T extends 'events' | 'deliveries' | 'delivery_attempts'>(
  trx: Database['db'],
  tableName: T,
  rows: Array<T extends 'events' ? EventsTable : T extends 'deliveries' ? DeliveriesTable : DeliveryAttemptsTable>,
): Promise<void> {
  for (let i = 0; i < rows.length; i += ROWS_PER_INSERT) {
    await trx
      .insertInto(tableName)
      .values(rows.slice(i, i + ROWS_PER_INSERT) as never)
      .execute();
  }
}

/** Failed deliveries are written in transactions of this many events. */
const FAILED_PER_TRANSACTION = 5000;

/**
 * `events` events, each with a delivery to every stream. Pending ones (a backlog) in one transaction,
 * so the worker finds them all at once. Failed ones (deliveries that exhausted their four attempts,
 * with their four attempt rows, as redelivery finds them: written pending, then updated to failed as
 * their last attempt's record does) in transactions of FAILED_PER_TRANSACTION events, so the writers of
 * the running node (its mail worker…) are not kept waiting meanwhile.
 */
async function insertOutbox(
  database: Database,
  streamIds: string[],
  events: number,
  status: 'pending' | 'failed',
): Promise<void> {
  const at = new Date().toISOString();
  const perTransaction = status === 'pending' ? events : FAILED_PER_TRANSACTION;
  for (let done = 0; done < events; done += perTransaction) {
    await database.db.transaction().execute(async (trx) => {
      for (let start = done; start < Math.min(events, done + perTransaction); start += ROWS_PER_INSERT) {
        const batch = Array.from(
          { length: Math.min(ROWS_PER_INSERT, events - start, done + perTransaction - start) },
          () => fixtureEvent(at),
        );
        await insertRows(trx, 'events', batch);
        const deliveries = batch.flatMap((event) =>
          streamIds.map((streamId): DeliveriesTable => ({
            stream_id: streamId,
            event_id: event.id,
            event_type: event.type,
            event_time: at,
            // A failed one as its last attempt left it: pending after three, then (below) failed by the
            // fourth's record, which on PostgreSQL leaves a dead version of each row for vacuum to free.
            status: 'pending',
            attempt_count: status === 'failed' ? 3 : 0,
            attempt_seq: status === 'failed' ? 3 : 0,
            next_attempt_at: at,
            claimed_until: null,
            updated_at: at,
          })),
        );
        await insertRows(trx, 'deliveries', deliveries);
        if (status === 'failed') {
          await insertRows(
            trx,
            'delivery_attempts',
            deliveries.flatMap((d) =>
              [1, 2, 3, 4].map((seq): DeliveryAttemptsTable => ({
                stream_id: d.stream_id,
                event_id: d.event_id,
                seq,
                status: 'failed',
                timestamp: at,
                error_message: 'Unexpected status code 503 from POST http://127.0. ...',
                duration: 12.5,
              })),
            ),
          );
          await trx
            .updateTable('deliveries')
            .set({ status: 'failed', attempt_count: 4, attempt_seq: 4 })
            .where('stream_id', 'in', streamIds)
            .where(
              'event_id',
              'in',
              batch.map((event) => event.id),
            )
            .execute();
        }
      }
    });
  }
}

/** An event id made `ms` after `id`: its first 8 base-58 digits are the time in milliseconds (ids.ts). */
function eventIdLater(id: string, ms: number): string {
  const DIGITS = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
  let time = [...id.slice(4, 12)].reduce((n, c) => n * 58 + DIGITS.indexOf(c), 0) + ms;
  let digits = '';
  for (let i = 0; i < 8; i++, time = Math.floor(time / 58)) digits = DIGITS[time % 58] + digits;
  return `evt_${digits}${id.slice(12)}`;
}

/** One failed delivery of the stream (as insertOutbox leaves one), of an event a day after now. */
async function insertLaterFailure(database: Database, streamId: string): Promise<void> {
  const at = new Date().toISOString();
  const event = { ...fixtureEvent(at), id: eventIdLater(newId.event(), 86_400_000) };
  await insertRows(database.db, 'events', [event]);
  await insertRows(database.db, 'deliveries', [
    {
      stream_id: streamId,
      event_id: event.id,
      event_type: event.type,
      event_time: at,
      status: 'failed',
      attempt_count: 4,
      attempt_seq: 4,
      next_attempt_at: at,
      claimed_until: null,
      updated_at: at,
    },
  ]);
}

async function countBy(
  database: Database,
  tableName: 'deliveries' | 'delivery_attempts',
): Promise<Record<string, number>> {
  const rows = await database.db
    .selectFrom(tableName)
    .select((eb) => ['status', eb.fn.countAll<number>().as('n')])
    .groupBy('status')
    .execute();
  return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
}

function percentile(values: number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

const ms1 = (n: number) => (Number.isFinite(n) ? `${n.toFixed(1)} ms` : 'n/a');
/** A table row of latencies: their count, p50, p99 and the longest. */
const percentilesRow = (label: string, values: number[]) => [
  label,
  fmt.int(values.length),
  ms1(percentile(values, 0.5)),
  ms1(percentile(values, 0.99)),
  ms1(Math.max(...values)),
];

// ---------------------------------------------------------------------------------------------
// a. Throughput

/** One measured run: the baseline's load, or one backlog drained by the worker. */
interface ThroughputRun {
  round: number;
  variant: string;
  perSecond: number;
  /** Requests sent (baseline) or deliveries in the backlog. */
  count: number;
  seconds: number;
  /** CPU time of the Tenantry nodes per delivery (all nodes together), µs; NaN for the baseline. */
  nodeCpuUs: number;
  /** CPU time of the receiver per request it answered, µs. */
  receiverCpuUs: number;
  /** Requests that carried a delivery already received (worker runs). */
  duplicates: number;
  /** Non-2xx answers and errors (baseline), or deliveries not recorded within the time limit (worker). */
  errors: number;
}

/**
 * Inserts a backlog of DELIVERIES deliveries in one transaction and waits until the receiver has
 * every one and every outcome is recorded. The rate runs from the first receipt, so the wait for
 * the worker's next poll (it is not woken by a commit from another process) is left out.
 */
async function drain(backend: Backend, streamIds: string[], receiver: Receiver, round: number): Promise<ThroughputRun> {
  await receiver.reset();
  const before = (await countBy(backend.database, 'deliveries')).delivered ?? 0;
  const events = Math.ceil(DELIVERIES / streamIds.length);
  const deliveries = events * streamIds.length;
  await insertOutbox(backend.database, streamIds, events, 'pending');
  const committedAt = wallClock();
  const cpuBefore = backend.nodes.map((node) => readCpuMs(node.pid));
  const receiverCpuBefore = readCpuMs(receiver.pid);
  const deadline = committedAt + RUN_LIMIT_MS;
  let stats = await receiver.stats();
  while (stats.distinct < deliveries && wallClock() < deadline) {
    await sleep(20);
    stats = await receiver.stats();
  }
  // Counting the pending rows reads only what is left of the backlog in the due index: cheap to poll.
  const pending = async () =>
    Number(
      (
        await backend.database.db
          .selectFrom('deliveries')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('status', '=', 'pending')
          .executeTakeFirstOrThrow()
      ).n,
    );
  while ((await pending()) > 0 && wallClock() < deadline) await sleep(10);
  const doneAt = wallClock();
  const recorded = ((await countBy(backend.database, 'deliveries')).delivered ?? 0) - before;
  const nodeCpuMs = backend.nodes.reduce((sum, node, i) => sum + readCpuMs(node.pid) - cpuBefore[i]!, 0);
  const receiverCpuMs = readCpuMs(receiver.pid) - receiverCpuBefore;
  const seconds = (doneAt - stats.first) / 1000;
  process.stdout.write(
    `    round ${round} ${backend.name}: ${fmt.int(recorded / seconds)} deliveries/s, ${fmt.int(recorded)} of ${fmt.int(deliveries)} recorded in ${seconds.toFixed(2)} s ` +
      `(${((doneAt - committedAt) / 1000).toFixed(2)} s from the commit), ${stats.count} received, ${stats.count - stats.distinct} duplicates, ${stats.connections} new connections\n`,
  );
  return {
    round,
    variant: `worker, ${backend.name}`,
    perSecond: recorded / seconds,
    count: deliveries,
    seconds,
    nodeCpuUs: (nodeCpuMs * 1000) / recorded,
    receiverCpuUs: (receiverCpuMs * 1000) / stats.count,
    duplicates: stats.count - stats.distinct,
    errors: deliveries - recorded,
  };
}

async function baselineRun(receiver: Receiver, body: string, round: number): Promise<ThroughputRun> {
  const headers = {
    'content-type': 'application/json',
    'user-agent': 'tenantry-event-streams/1',
    authorization: `Bearer ${WEBHOOK_TOKEN}`,
  };
  const options = {
    port: receiver.port,
    path: '/hook/0',
    method: 'POST' as const,
    headers,
    body,
    connections: CONCURRENCY,
    warmupSeconds: 0,
    maxRequests: 1_000_000,
  };
  await load({ ...options, durationSeconds: 2 });
  await receiver.reset();
  const cpuBefore = readCpuMs(receiver.pid);
  const figures = await load({ ...options, durationSeconds: 10 });
  const received = (await receiver.stats()).count;
  process.stdout.write(`    round ${round} baseline: ${fmt.int(figures.reqPerSec)} req/s\n`);
  return {
    round,
    variant: `baseline: autocannon → receiver, ${CONCURRENCY} connections`,
    perSecond: figures.reqPerSec,
    count: figures.requests,
    seconds: figures.seconds,
    nodeCpuUs: NaN,
    receiverCpuUs: ((readCpuMs(receiver.pid) - cpuBefore) * 1000) / received,
    duplicates: 0,
    errors: figures.errors + figures.non2xx,
  };
}

async function throughputOn(
  kind: 'sqlite' | 'postgres',
  nodeCount: number,
  receiver: Receiver,
): Promise<{ name: string; runs: ThroughputRun[] } | undefined> {
  const backend = await startBackend(kind, nodeCount);
  if (!backend) return undefined;
  try {
    const streamIds = await createStreams(backend.nodes[0]!, receiver.port, STREAMS);
    // The baseline POSTs what a delivery POSTs: an envelope of the same size, with the same headers.
    const body = JSON.stringify(envelope(fixtureEvent(new Date().toISOString()), streamIds[0]!));
    const runs: ThroughputRun[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      runs.push(await baselineRun(receiver, body, round));
      runs.push(await drain(backend, streamIds, receiver, round));
    }
    const deliveries = await countBy(backend.database, 'deliveries');
    const attempts = await countBy(backend.database, 'delivery_attempts');
    process.stdout.write(
      `    ${backend.name}: deliveries by status ${JSON.stringify(deliveries)}, attempt rows by status ${JSON.stringify(attempts)}\n`,
    );
    return { name: backend.name, runs };
  } finally {
    await backend.close();
  }
}

export async function throughput(): Promise<void> {
  const receiver = await startReceiver(false);
  try {
    for (const [kind, nodeCount, aim] of [
      ['sqlite', 1, 2000],
      ['postgres', 2, undefined],
    ] as const) {
      const result = await throughputOn(kind, nodeCount, receiver);
      if (!result) continue;
      const means = [...new Set(result.runs.map((r) => r.variant))].map((variant): ThroughputRun => {
        const of = result.runs.filter((r) => r.variant === variant);
        const avg = (key: keyof ThroughputRun) => mean(of.map((r) => r[key] as number));
        return {
          round: 0,
          variant,
          perSecond: avg('perSecond'),
          count: avg('count'),
          seconds: avg('seconds'),
          nodeCpuUs: avg('nodeCpuUs'),
          receiverCpuUs: avg('receiverCpuUs'),
          duplicates: avg('duplicates'),
          errors: avg('errors'),
        };
      });
      const us = (n: number) => (Number.isFinite(n) ? fmt.int(n) : '—');
      table(
        `delivery-throughput — ${result.name}, ${fmt.int(result.runs[1]!.count)} deliveries over ${STREAMS} streams per round`,
        [
          'round',
          'variant',
          'per second',
          'requests / deliveries',
          'seconds',
          'node CPU µs/delivery',
          'receiver CPU µs/request',
          'duplicates',
          'errors / unrecorded',
        ],
        [...result.runs, ...means].map((r) => [
          r.round === 0 ? '**mean**' : `round ${r.round}`,
          r.variant,
          fmt.int(r.perSecond),
          fmt.int(r.count),
          r.seconds.toFixed(2),
          us(r.nodeCpuUs),
          us(r.receiverCpuUs),
          r.duplicates,
          r.errors,
        ]),
      );
      const [baseline, worker] = means as [ThroughputRun, ThroughputRun];
      process.stdout.write(
        `\n  ratio worker/receiver (mean per second): ${fmt.ratio(worker.perSecond / baseline.perSecond)}`,
      );
      process.stdout.write(
        aim
          ? ` — target ≥ ${fmt.int(aim)} deliveries/s: ${verdict(worker.perSecond >= aim)} (${fmt.int(worker.perSecond)}/s)\n`
          : '\n',
      );
    }
  } finally {
    await receiver.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// b. Latency

interface LatencyFigures {
  /** POST sent → 201 received, ms. */
  created: number[];
  /** POST sent → event received, ms. */
  endToEnd: number[];
  /** The event's time (set in the user's transaction, just before it commits) → event received, ms. */
  afterCommit: number[];
  /** Users created whose event did not arrive within the time limit. */
  lost: number;
  /** Events that arrived more than once. */
  duplicates: number;
  /** Users not created (non-201). */
  failed: number;
}

async function latencyOn(backend: Backend, receiver: Receiver, label: string): Promise<LatencyFigures> {
  await createStreams(backend.nodes[0]!, receiver.port, 1);
  const createUser = (node: Node, email: string) =>
    api(node, 'POST', '/api/v2/users', {
      connection: 'Username-Password-Authentication',
      email,
      password: 'correct horse battery staple',
      verify_email: false,
    });
  // Warm-up: the first users pay for JIT and connection set-up on every side.
  for (let i = 0; i < 5; i++)
    await createUser(backend.nodes[i % backend.nodes.length]!, `warm-${label}-${i}@bench.example`);
  await waitForCount(receiver, 5, wallClock() + 30_000);
  await receiver.reset();

  const count = LATENCY_RATE * LATENCY_SECONDS;
  const sent = new Map<string, { at: number; created?: number; status?: number }>();
  const requests: Array<Promise<void>> = [];
  const start = wallClock() + 50;
  // Open loop: each user is sent at its time whatever the previous ones are doing.
  for (let i = 0; i < count; i++) {
    const due = start + (i * 1000) / LATENCY_RATE;
    const wait = due - wallClock();
    if (wait > 0) await sleep(wait);
    const email = `latency-${label}-${i}@bench.example`;
    const entry: { at: number; created?: number; status?: number } = { at: wallClock() };
    sent.set(email, entry);
    requests.push(
      createUser(backend.nodes[i % backend.nodes.length]!, email).then((r) => {
        entry.created = wallClock();
        entry.status = r.status;
      }),
    );
  }
  await Promise.all(requests);
  const created = [...sent].filter(([, s]) => s.status === 201).map(([email]) => email);
  // Every created user's event, or the time limit.
  const deadline = wallClock() + RUN_LIMIT_MS;
  let received = await receiver.received();
  while (wallClock() < deadline && !created.every((email) => received.some((r) => r.email === email))) {
    await sleep(50);
    received = await receiver.received();
  }
  const figures: LatencyFigures = {
    created: [],
    endToEnd: [],
    afterCommit: [],
    lost: 0,
    duplicates: 0,
    failed: count - created.length,
  };
  for (const entry of sent.values()) if (entry.created !== undefined) figures.created.push(entry.created - entry.at);
  const seen = new Set<string>();
  for (const r of received) {
    const entry = r.email === undefined ? undefined : sent.get(r.email);
    if (!entry) continue;
    if (seen.has(r.email!)) {
      figures.duplicates++;
      continue;
    }
    seen.add(r.email!);
    figures.endToEnd.push(r.at - entry.at);
    figures.afterCommit.push(r.at - r.eventTime);
  }
  figures.lost = created.filter((email) => !seen.has(email)).length;
  return figures;
}

async function waitForCount(receiver: Receiver, count: number, deadline: number): Promise<void> {
  while ((await receiver.stats()).distinct < count && wallClock() < deadline) await sleep(10);
}

export async function latency(): Promise<void> {
  const receiver = await startReceiver(true);
  try {
    for (const [kind, nodeCount] of [
      ['sqlite', 1],
      ['postgres', 2],
    ] as const) {
      const backend = await startBackend(kind, nodeCount);
      if (!backend) continue;
      let figures: LatencyFigures;
      try {
        figures = await latencyOn(backend, receiver, kind);
      } finally {
        await backend.close();
      }
      table(
        `delivery-latency — ${backend.name}, ${LATENCY_RATE} users/s for ${LATENCY_SECONDS} s, one stream`,
        ['measure', 'samples', 'p50', 'p99', 'max'],
        [
          percentilesRow('baseline: POST /api/v2/users sent → 201 received', figures.created),
          percentilesRow('POST sent → event received (end to end)', figures.endToEnd),
          percentilesRow('event time (in the commit) → event received', figures.afterCommit),
        ],
      );
      const p99 = percentile(figures.endToEnd, 0.99);
      process.stdout.write(
        [
          '',
          `  ratio end-to-end/creation (p50): ${fmt.ratio(percentile(figures.endToEnd, 0.5) / percentile(figures.created, 0.5))}; users not created: ${figures.failed}; events not received: ${figures.lost}; received twice: ${figures.duplicates}`,
          `  end-to-end p99 ${ms1(p99)} — target < 250 ms: ${verdict(p99 < 250 && figures.lost === 0)}`,
          '',
        ].join('\n'),
      );
    }
  } finally {
    await receiver.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// c. Redelivery

export async function redelivery(): Promise<void> {
  for (const kind of REDELIVER_DATABASES) {
    // No worker: the figure is the queuing alone, and nothing is sent.
    const backend = await startBackend(kind, 1, {
      DELIVERY_WORKER: 'false',
      ...(REDELIVER_LANES === undefined ? {} : { EVENT_STREAM_REDELIVERY_LANES: REDELIVER_LANES }),
    });
    if (!backend) continue;
    try {
      const node = backend.nodes[0]!;
      const [streamId, other] = await createStreams(node, 9, 2);
      process.stdout.write(
        `    ${backend.name}: the rest in ${REDELIVER_LANES ?? (kind === 'postgres' ? '2' : '1')} lane(s) (EVENT_STREAM_REDELIVERY_LANES)\n`,
      );
      const fixtureStart = wallClock();
      const FAILED_IN_ALL = REDELIVER + (REDELIVER_LATER ? 1 : 0);
      await insertOutbox(backend.database, [streamId!], REDELIVER, 'failed');
      if (REDELIVER_LATER) await insertLaterFailure(backend.database, streamId!);
      // SQLite's fixture runs synchronously, its promises resolved as microtasks: for its minutes this
      // process saw no I/O, so the pooled connection the node closed (keep-alive, 5 s) is still in the
      // pool. A turn of timers and I/O lets it go before the probe asks on it ("other side closed").
      await sleep(100);
      process.stdout.write(
        `    ${backend.name}: ${fmt.int(REDELIVER)} failed deliveries (4 attempt rows each) inserted in ${fmt.s(wallClock() - fixtureStart)}${REDELIVER_LATER ? ', and one a day later' : ''}\n`,
      );
      const baseline = await probe(node, other!, async () => false, BASELINE_PROBE_MS);
      const rssBefore = readRss(node.pid);
      let rssPeak = rssBefore;
      const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, readRss(node.pid))), 50);
      sampler.unref();
      const rows: Array<Array<string | number>> = [];
      const times: { answer: number[]; queued: number[]; update: number[]; probe: number[] } = {
        answer: [],
        queued: [],
        update: [],
        probe: [],
      };
      // PostgreSQL: each timed statement finds the table as failed deliveries that wait for a redelivery
      // (minutes or days old) are found: vacuumed (the fixture's hint bits set, the last round's dead row
      // versions gone) and checkpointed, so no write-back of the fixture's 500 MB runs beside it. Every
      // page it changes is then changed for the first time since a checkpoint: the statement writes a
      // full-page image of each, as a redelivery of deliveries that failed before the last one does.
      const vacuum = async () => {
        if (!backend.database.pool) return;
        await backend.database.pool.query('VACUUM deliveries');
        await backend.database.pool.query('CHECKPOINT');
      };
      // The request queues the first chunk and records the rest, which the node queues in the background.
      const allQueued = async () =>
        (await backend.database.db.selectFrom('event_stream_redeliveries').select('id').executeTakeFirst()) ===
        undefined;
      for (let round = 1; round <= ROUNDS; round++) {
        await vacuum();
        const started = wallClock();
        const response = await api(node, 'POST', `/api/v2/event-streams/${streamId}/redeliver`, {});
        const answerMs = wallClock() - started;
        if (response.status !== 202)
          throw new Error(`redeliver answered ${response.status} ${JSON.stringify(response.body)}`);
        const during = await probe(node, other!, allQueued, REMOVAL_LIMIT_MS);
        const ms = wallClock() - started;
        if (!(await allQueued())) throw new Error(`not all queued within ${REMOVAL_LIMIT_MS / 1000} s`);
        const queued = (await countBy(backend.database, 'deliveries')).pending ?? 0;
        // Each one queued again holds its retrying attempt's seq (four attempts, then one per round).
        const { waiting } = await backend.database.db
          .selectFrom('deliveries')
          .select((eb) => eb.fn.countAll<number>().as('waiting'))
          .where('status', '=', 'pending')
          .where('attempt_count', '=', 0)
          .where('attempt_seq', '=', 4 + round)
          .executeTakeFirstOrThrow();
        if (queued !== FAILED_IN_ALL || Number(waiting) !== FAILED_IN_ALL)
          throw new Error(`after redeliver: ${queued} pending, ${waiting} waiting for their retrying attempt`);
        times.answer.push(answerMs);
        times.queued.push(ms);
        times.probe.push(...during);
        rows.push([`round ${round}`, 'POST …/redeliver {} → 202', fmt.int(queued), ms1(answerMs), ms1(ms)]);
        // The baseline, which also sets the rows back to failed for the next round.
        await vacuum();
        const updateStart = wallClock();
        await backend.database.db
          .updateTable('deliveries')
          .set({ status: 'failed' })
          .where('stream_id', '=', streamId!)
          .where('status', '=', 'pending')
          .execute();
        const updateMs = wallClock() - updateStart;
        times.update.push(updateMs);
        rows.push([
          `round ${round}`,
          'baseline: one UPDATE of the rows back to failed',
          fmt.int(FAILED_IN_ALL),
          '',
          ms1(updateMs),
        ]);
        process.stdout.write(
          `    round ${round}: redeliver answered in ${ms1(answerMs)}, all queued in ${ms1(ms)}, baseline UPDATE ${ms1(updateMs)}\n`,
        );
      }
      clearInterval(sampler);
      process.stdout.write(
        `    node RSS: ${fmt.mb(rssBefore)} before the redeliveries, peak ${fmt.mb(rssPeak)} during them (+${fmt.mb(rssPeak - rssBefore)})\n`,
      );
      table(
        `redelivery — ${backend.name}, ${fmt.int(FAILED_IN_ALL)} failed deliveries of one stream${REDELIVER_LATER ? ', the last a day after the rest' : ''}`,
        ['round', 'variant', 'deliveries', 'answered', 'all queued'],
        rows,
      );
      table(
        `another stream read every ${PROBE_EVERY_MS} ms — ${backend.name}`,
        ['probe', 'requests', 'p50', 'p99', 'max'],
        [
          percentilesRow('baseline: nothing being queued', baseline),
          percentilesRow('while the redeliveries queue', times.probe),
        ],
      );
      process.stdout.write(
        `\n  ratio all queued/UPDATE (mean time): ${fmt.ratio(mean(times.queued) / mean(times.update))}; mean answer ${ms1(mean(times.answer))}, mean all queued ${ms1(mean(times.queued))}\n`,
      );
    } finally {
      await backend.close();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Claim cost as the backlog grows

const CLAIM_BACKLOGS = (process.env.BENCH_CLAIM_BACKLOGS ?? '1000,1000000').split(',').map(Number);
const CLAIMS_MEASURED = 20;
const CLAIM_LIMIT = 32;

/**
 * claim-growth: the cost of one claim (claimDue, the worker's statement: up to 32 due deliveries under
 * a lease, fair across streams) with 1,000 and with 1,000,000 deliveries due, on each database. The
 * claims run from the benchmark's own handle on the node's database (the node's worker is off), 20 in a
 * row after 3 dropped; each takes rows the previous ones left, as a worker's would. Then the case a
 * claim in due order alone pays for the whole backlog: that stream at its cap, and a second stream's one
 * due delivery behind its backlog, claimed and handed back 20 times. The target: the large backlog's
 * claim within 2× the small one's, in either case.
 */
export async function claimGrowth(): Promise<void> {
  const kinds = (process.env.BENCH_CLAIM_DATABASES ?? 'sqlite,postgres').split(',') as Array<'sqlite' | 'postgres'>;
  for (const kind of kinds) {
    const backend = await startBackend(kind, 1, { DELIVERY_WORKER: 'false' });
    if (!backend) continue;
    try {
      const node = backend.nodes[0]!;
      const [streamId, behindId] = await createStreams(node, 9, 2);
      const rows: Array<Array<string | number>> = [];
      const means: number[] = [];
      const behindRows: Array<Array<string | number>> = [];
      const behindMeans: number[] = [];
      let due = 0;
      for (const backlog of CLAIM_BACKLOGS) {
        const fixtureStart = wallClock();
        await insertOutbox(backend.database, [streamId!], backlog - due, 'pending');
        due = backlog;
        process.stdout.write(
          `    ${backend.name}: ${fmt.int(backlog)} due deliveries (fixture ${fmt.s(wallClock() - fixtureStart)})\n`,
        );
        const claim = () =>
          claimDue(
            backend.database,
            { leaseMs: 600_000 },
            {
              limit: CLAIM_LIMIT,
              perStream: CLAIM_LIMIT,
              reserve: 0,
              breakerFailures: 1_000_000,
              running: new Map(),
            },
          );
        if (process.env.BENCH_CLAIM_ANALYZE && backend.database.pool) await backend.database.pool.query('ANALYZE');
        if (process.env.BENCH_CLAIM_EXPLAIN && backend.database.pool) {
          const plan = await backend.database.pool.query(`EXPLAIN (ANALYZE, BUFFERS) ${CLAIM_STATEMENT_FOR_EXPLAIN}`, [
            null,
            600000,
            '{}',
            1000000,
            CLAIM_LIMIT,
            CLAIM_LIMIT,
            CLAIM_LIMIT,
          ]);
          process.stdout.write(plan.rows.map((r) => `      ${r['QUERY PLAN']}`).join('\n') + '\n');
        }
        for (let i = 0; i < 3; i++) await claim();
        const times: number[] = [];
        for (let i = 0; i < CLAIMS_MEASURED; i++) {
          const started = wallClock();
          const claimed = await claim();
          times.push(wallClock() - started);
          if (claimed.length !== CLAIM_LIMIT) throw new Error(`a claim took ${claimed.length} deliveries`);
        }
        const meanMs = mean(times);
        means.push(meanMs);
        rows.push([fmt.int(backlog), ms1(meanMs), ms1(percentile(times, 0.5)), ms1(Math.max(...times))]);
        // The next backlog starts from unclaimed rows again.
        await backend.database.db.updateTable('deliveries').set({ claimed_until: null }).execute();

        // The backlog's stream at its cap; the other stream's delivery, due after all of the backlog.
        await insertOutbox(backend.database, [behindId!], 1, 'pending');
        const behind = () =>
          claimDue(
            backend.database,
            { leaseMs: 600_000 },
            {
              limit: 1,
              perStream: CLAIM_LIMIT,
              reserve: 0,
              breakerFailures: 1_000_000,
              running: new Map([[streamId!, CLAIM_LIMIT]]),
            },
          );
        const behindTimes: number[] = [];
        for (let i = 0; i < 3 + CLAIMS_MEASURED; i++) {
          const started = wallClock();
          const claimed = await behind();
          if (i >= 3) behindTimes.push(wallClock() - started);
          if (claimed.length !== 1 || claimed[0]!.stream_id !== behindId)
            throw new Error(
              `the claim behind the backlog took ${claimed.map((c) => c.stream_id).join(', ') || 'nothing'}`,
            );
          // Only the claimed delivery is handed back: an UPDATE of every row here rewrote the whole backlog
          // between two claims, and each claim then met a cold page cache and a WAL of the backlog's pages.
          await backend.database.db
            .updateTable('deliveries')
            .set({ claimed_until: null })
            .where('stream_id', '=', behindId!)
            .execute();
        }
        behindMeans.push(mean(behindTimes));
        behindRows.push([
          fmt.int(backlog),
          ms1(mean(behindTimes)),
          ms1(percentile(behindTimes, 0.5)),
          ms1(Math.max(...behindTimes)),
        ]);
        await backend.database.db.deleteFrom('deliveries').where('stream_id', '=', behindId!).execute();
      }
      table(
        `claim cost — ${backend.name}, claims of ${CLAIM_LIMIT} from one stream's backlog`,
        ['deliveries due', 'mean', 'median', 'max'],
        rows,
      );
      table(
        `claim cost — ${backend.name}, a claim of 1 for a stream behind the backlog of a stream at its cap`,
        ['deliveries due', 'mean', 'median', 'max'],
        behindRows,
      );
      const ratio = means.at(-1)! / means[0]!;
      const behindRatio = behindMeans.at(-1)! / behindMeans[0]!;
      process.stdout.write(
        `\n  ratio ${fmt.int(CLAIM_BACKLOGS.at(-1)!)} due / ${fmt.int(CLAIM_BACKLOGS[0]!)} due: ${fmt.ratio(ratio)} (target ≤ 2: ${verdict(ratio <= 2)}); ` +
          `behind a stream at its cap: ${fmt.ratio(behindRatio)} (${verdict(behindRatio <= 2)})\n`,
      );
    } finally {
      await backend.close();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// stats-growth

const STATS_ATTEMPTS = (process.env.BENCH_STATS_ATTEMPTS ?? '1000,1000000').split(',').map(Number);
const STATS_MEASURED = 20;
/** The longest window GET …/stats takes, every minute of it counted: the most rows one answer reads. */
const STATS_WIDEST_DAYS = 31;

/**
 * Before migration 021, GET …/stats counted the stream's attempts of its window, grouped per minute:
 * the baseline, run here on the same rows.
 */
const perAttemptCount = (database: Database, streamId: string, from: string, to: string) =>
  database.db
    .selectFrom('delivery_attempts')
    .select((eb) => [sql<string>`substr(timestamp, 1, 16)`.as('minute'), 'status', eb.fn.countAll().as('n')])
    .where('stream_id', '=', streamId)
    .where('timestamp', '>=', from)
    .where('timestamp', '<', to)
    .where('status', 'in', ['delivered', 'failed'])
    .groupBy([sql`substr(timestamp, 1, 16)`, 'status'])
    .execute();

async function timed(times: number, run: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < 3; i++) await run();
  const measured: number[] = [];
  for (let i = 0; i < times; i++) {
    const started = wallClock();
    await run();
    measured.push(wallClock() - started);
  }
  return measured;
}

/**
 * stats-growth: GET …/event-streams/{id}/stats over HTTP (the last 3 hours in minute buckets, and the
 * default 14 days in day buckets) on a stream with 1,000 and with 1,000,000 failed attempts in its window,
 * each time 20 requests after 3 dropped. The attempts are fixture rows (four per failed delivery) and
 * their per-minute counts are written as migration 021 writes them for attempts recorded before it.
 * Baseline: the per-attempt count the endpoint ran before the counts, on the same rows. Then the widest
 * read: a stream with a count for every minute of 32 days, asked for the 31-day window whose 32 day
 * buckets hold them all (from 23:00), in days and in hours, and for its last 24 hours in minutes. Target: the answer's
 * cost flat as the attempts grow (within 2×).
 */
export async function statsGrowth(): Promise<void> {
  const kinds = (process.env.BENCH_STATS_DATABASES ?? 'sqlite,postgres').split(',') as Array<'sqlite' | 'postgres'>;
  for (const kind of kinds) {
    const backend = await startBackend(kind, 1, { DELIVERY_WORKER: 'false' });
    if (!backend) continue;
    try {
      const node = backend.nodes[0]!;
      const [streamId, wideId] = await createStreams(node, 9, 2);
      const get = async (query: string) => {
        const answer = await api(node, 'GET', `/api/v2/event-streams/${streamId}/stats${query}`);
        if (answer.status !== 200) throw new Error(`stats answered ${answer.status}: ${JSON.stringify(answer.body)}`);
        return answer.body;
      };
      const rows: Array<Array<string | number>> = [];
      const figures: number[] = [];
      let attempts = 0;
      for (const target of STATS_ATTEMPTS) {
        const fixtureStart = wallClock();
        await insertOutbox(backend.database, [streamId!], (target - attempts) / 4, 'failed');
        attempts = target;
        const countsStart = wallClock();
        await sql`DELETE FROM delivery_counts WHERE stream_id = ${streamId}`.execute(backend.database.db);
        await sql`INSERT INTO delivery_counts (stream_id, minute, delivered, failed)
          SELECT stream_id, substr(timestamp, 1, 16),
            sum(CASE WHEN status = 'delivered' THEN 1 ELSE 0 END), sum(CASE WHEN status = 'failed' THEN 1 ELSE 0 END)
          FROM delivery_attempts WHERE stream_id = ${streamId} AND status IN ('delivered', 'failed')
          GROUP BY stream_id, substr(timestamp, 1, 16)`.execute(backend.database.db);
        // What migration 021 costs a database holding these attempts, once.
        const countsSeconds = wallClock() - countsStart;
        if (backend.database.pool) await backend.database.pool.query('ANALYZE');
        process.stdout.write(
          `    ${backend.name}: ${fmt.int(attempts)} attempts (fixture ${fmt.s(wallClock() - fixtureStart)}, their counts written as migration 021 does in ${fmt.s(countsSeconds)})\n`,
        );
        const now = Date.now();
        const from = new Date(now - 3 * 3600_000).toISOString();
        const to = new Date(now + 60_000).toISOString();
        const baseline = await timed(5, () => perAttemptCount(backend.database, streamId!, from, to));
        const minutes = await timed(STATS_MEASURED, () => get('?scale_factor=60'));
        const days = await timed(STATS_MEASURED, () => get(''));
        const answered = await get('?scale_factor=60');
        const total = (answered.metrics as Array<{ window_total: number }>).reduce((s, m) => s + m.window_total, 0);
        if (total !== attempts) throw new Error(`stats counted ${total} attempts of ${attempts}`);
        figures.push(mean(minutes));
        rows.push([
          fmt.int(attempts),
          ms1(mean(baseline)),
          `${ms1(mean(minutes))} (median ${ms1(percentile(minutes, 0.5))})`,
          `${ms1(mean(days))} (median ${ms1(percentile(days, 0.5))})`,
        ]);
      }
      table(
        `GET …/stats — ${backend.name}, one stream`,
        ['attempts in the window', 'baseline: per-attempt count', 'last 3 h, minutes (mean)', 'default 14 days (mean)'],
        rows,
      );
      const ratio = figures.at(-1)! / figures[0]!;
      process.stdout.write(
        `\n  ratio ${fmt.int(STATS_ATTEMPTS.at(-1)!)} / ${fmt.int(STATS_ATTEMPTS[0]!)} attempts: ${fmt.ratio(ratio)} (target ≤ 2: ${verdict(ratio <= 2)})\n`,
      );

      // The widest read: a 31-day window from 23:00 of a day, whose 32 day buckets read every minute of
      // 32 days, each counted.
      const dayMs = 86_400_000;
      const firstDay = Math.floor(Date.now() / dayMs) * dayMs - (STATS_WIDEST_DAYS + 1) * dayMs;
      const counts = Array.from({ length: (STATS_WIDEST_DAYS + 1) * 1440 }, (_, i) => ({
        stream_id: wideId!,
        minute: new Date(firstDay + i * 60_000).toISOString().slice(0, 16),
        delivered: 5,
        failed: 1,
      }));
      await backend.database.db.transaction().execute(async (trx) => {
        for (let i = 0; i < counts.length; i += ROWS_PER_INSERT)
          await trx
            .insertInto('delivery_counts')
            .values(counts.slice(i, i + ROWS_PER_INSERT))
            .execute();
      });
      if (backend.database.pool) await backend.database.pool.query('ANALYZE');
      const wide = (query: string) => async () => {
        const answer = await api(node, 'GET', `/api/v2/event-streams/${wideId}/stats${query}`);
        if (answer.status !== 200) throw new Error(`stats answered ${answer.status}: ${JSON.stringify(answer.body)}`);
        const total = (answer.body.metrics as Array<{ window_total: number }>).reduce((n, m) => n + m.window_total, 0);
        return total;
      };
      const start = firstDay + 23 * 3600_000;
      const end = start + STATS_WIDEST_DAYS * dayMs;
      const window = `date_from=${new Date(start).toISOString()}&date_to=${new Date(end).toISOString()}`;
      if ((await wide(`?${window}`)()) !== counts.length * 6)
        throw new Error('the widest window did not read every minute of its buckets');
      const daysOf31 = await timed(STATS_MEASURED, wide(`?${window}`));
      const hoursOf31 = await timed(STATS_MEASURED, wide(`?${window}&scale_factor=3600`));
      const lastDay = await timed(
        STATS_MEASURED,
        wide(
          `?scale_factor=60&date_from=${new Date(end - dayMs).toISOString()}&date_to=${new Date(end).toISOString()}`,
        ),
      );
      table(
        `GET …/stats — ${backend.name}, a stream with a count for every minute of ${STATS_WIDEST_DAYS + 1} days (${fmt.int(counts.length)} rows)`,
        ['window', 'mean', 'median', 'max'],
        [
          [
            `${STATS_WIDEST_DAYS} days from 23:00, its ${STATS_WIDEST_DAYS + 1} day buckets`,
            ms1(mean(daysOf31)),
            ms1(percentile(daysOf31, 0.5)),
            ms1(Math.max(...daysOf31)),
          ],
          [
            `the same, hour buckets`,
            ms1(mean(hoursOf31)),
            ms1(percentile(hoursOf31, 0.5)),
            ms1(Math.max(...hoursOf31)),
          ],
          ['24 hours, minute buckets', ms1(mean(lastDay)), ms1(percentile(lastDay, 0.5)), ms1(Math.max(...lastDay))],
        ],
      );
    } finally {
      await backend.close();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// deletion-stall

const DELETION_DELIVERIES = Number(process.env.BENCH_DELETION_DELIVERIES ?? 250_000);
const PROBE_EVERY_MS = 50;
const BASELINE_PROBE_MS = 5_000;
const DONE_EVERY_MS = 5;
const REMOVAL_LIMIT_MS = 120_000;

/** GET of one stream every PROBE_EVERY_MS until `done()` (asked every DONE_EVERY_MS), or `limitMs`: each answer's latency. */
async function probe(node: Node, streamId: string, done: () => Promise<boolean>, limitMs: number): Promise<number[]> {
  const latencies: number[] = [];
  const until = wallClock() + limitMs;
  while (wallClock() < until && !(await done())) {
    const started = wallClock();
    const answer = await api(node, 'GET', `/api/v2/event-streams/${streamId}`);
    if (answer.status !== 200) throw new Error(`the probe answered ${answer.status}`);
    latencies.push(wallClock() - started);
    // `done` is asked every few ms meanwhile, so that when the work ended is known to within them.
    while (wallClock() - started < PROBE_EVERY_MS && wallClock() < until && !(await done())) await sleep(DONE_EVERY_MS);
  }
  return latencies;
}

/**
 * deletion-stall: what deleting a stream with a long history costs every other request, on one SQLite
 * node (where the event loop and the database are shared by every tenant). A stream with
 * BENCH_DELETION_DELIVERIES failed deliveries (four attempts each, the redelivery fixture) is deleted
 * while another stream is read every 50 ms; the DELETE's own time, the background removal's, and the
 * probe's latency meanwhile are reported. Baseline: the same probe for 5 s before, nothing being deleted.
 * Before the removal in chunks the DELETE was one statement: 16 s for 1,000,000 deliveries and attempts.
 */
export async function deletionStall(): Promise<void> {
  const backend = await startBackend('sqlite', 1, { DELIVERY_WORKER: 'false' });
  if (!backend) return;
  try {
    const node = backend.nodes[0]!;
    const [doomed, other] = await createStreams(node, 9, 2);
    const fixtureStart = wallClock();
    await insertOutbox(backend.database, [doomed!], DELETION_DELIVERIES, 'failed');
    const rows = DELETION_DELIVERIES * 5;
    process.stdout.write(
      `    ${backend.name}: ${fmt.int(DELETION_DELIVERIES)} deliveries and ${fmt.int(DELETION_DELIVERIES * 4)} attempts (fixture ${fmt.s(wallClock() - fixtureStart)})\n`,
    );
    const baseline = await probe(node, other!, async () => false, BASELINE_PROBE_MS);
    const deleteStart = wallClock();
    const deleted = await api(node, 'DELETE', `/api/v2/event-streams/${doomed}`);
    const deleteMs = wallClock() - deleteStart;
    if (deleted.status !== 204) throw new Error(`DELETE answered ${deleted.status}`);
    const gone = async () =>
      (await backend.database.db
        .selectFrom('event_streams')
        .select('id')
        .where('id', '=', doomed!)
        .executeTakeFirst()) === undefined;
    const during = await probe(node, other!, gone, REMOVAL_LIMIT_MS);
    const removalMs = wallClock() - deleteStart;
    if (!(await gone())) throw new Error(`the removal did not end within ${REMOVAL_LIMIT_MS / 1000} s`);
    const left = await countBy(backend.database, 'deliveries');
    if (Object.keys(left).length > 0) throw new Error(`deliveries left: ${JSON.stringify(left)}`);
    table(
      `deletion — ${backend.name}, a stream of ${fmt.int(rows)} rows deleted while another is read every ${PROBE_EVERY_MS} ms`,
      ['probe', 'requests', 'p50', 'p99', 'max'],
      [percentilesRow('baseline: nothing being deleted', baseline), percentilesRow('while the removal runs', during)],
    );
    const ratio = percentile(during, 0.99) / percentile(baseline, 0.99);
    process.stdout.write(
      `\n  DELETE answered in ${ms1(deleteMs)}; the removal took ${fmt.s(removalMs)}; probe p99 during / baseline: ${fmt.ratio(ratio)}\n`,
    );
  } finally {
    await backend.close();
  }
}
