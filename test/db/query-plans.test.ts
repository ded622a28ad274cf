import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { migrate, openDatabase, type Database } from '../../src/db/database.ts';
import { encodeCursor } from '../../src/http/cursor.ts';
import { OutboxStore } from '../../src/mail/store.ts';
import { CustomDomainStore } from '../../src/modules/custom-domains/store.ts';
import { Deliveries } from '../../src/modules/event-streams/deliveries.ts';
import { claimDue } from '../../src/modules/event-streams/store/claim.ts';
import { DeliveryStore } from '../../src/modules/event-streams/store/deliveries.ts';
import { StreamStore } from '../../src/modules/event-streams/store/streams.ts';
import { RedeliveryStore, type ClaimedRedelivery } from '../../src/modules/event-streams/store/redeliveries.ts';
import { redeliveryChunk, redeliveryCursor } from '../../src/modules/event-streams/redelivery/worker.ts';
import { TenantStore } from '../../src/modules/tenants/store.ts';
import { UserStore } from '../../src/modules/users/store.ts';
import { createTestDatabase, eachDatabase, type TestDatabase } from '../helpers/databases.ts';
import { recordingDatabase, type RecordedQuery } from '../helpers/recorded-queries.ts';

/**
 * The queries of hot or growing paths use an index: each is run through its store on tables of a few
 * thousand rows, every statement the store issued is recorded as it was sent (see recorded-queries.ts)
 * and its plan asked for. SQLite: EXPLAIN QUERY PLAN on the tables as the server leaves them (it never
 * runs ANALYZE); PostgreSQL: EXPLAIN (FORMAT JSON) after ANALYZE, with sequential scans allowed, so a
 * missing index shows as a Seq Scan chosen on its merits. SHOW_PLANS=1 prints every statement and its plan.
 */

const ROWS = 4000;
const AT = '2026-06-01T00:00:00.000Z';
const PAST = '2026-01-01T00:00:00.000Z';
const FUTURE = '2027-01-01T00:00:00.000Z';

/** 1..ROWS, in a form both dialects accept. */
const numbers = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${ROWS})`;

const FIXTURE = [
  `INSERT INTO tenants (id, domain, created_at) ${numbers} SELECT 't' || (i - 1), 't' || (i - 1) || '.example', '${AT}' FROM n`,
  `INSERT INTO users (tenant_id, user_id, connection, email, document, idp_tokens, password_hash, created_at, updated_at)
   ${numbers} SELECT 't' || (i % 50), 'auth0|u' || i, 'Username-Password-Authentication', 'u' || i || '@example.com',
     '{}', NULL, NULL, '${AT}', '${AT}' FROM n`,
  `INSERT INTO event_streams (id, tenant_id, name, status, subscriptions, destination, secret, created_at, updated_at)
   ${numbers} SELECT 'est_' || i, 't' || (i % 50), NULL, CASE WHEN i % 7 = 0 THEN 'disabled' ELSE 'enabled' END,
     '[]', '{"type":"webhook"}', NULL, '${AT}', '${AT}' FROM n`,
  `INSERT INTO events (id, tenant_id, type, time, source, data, purpose)
   ${numbers} SELECT 'evt_' || i, 't1', 'user.created', '${AT}', 'urn:test', '{}', NULL FROM n`,
  // Per stream: most delivered, some failed (the log), a few pending (some due, some not yet).
  `INSERT INTO deliveries (stream_id, event_id, event_type, event_time, status, attempt_count, attempt_seq,
     next_attempt_at, claimed_until, updated_at)
   ${numbers} SELECT 'est_' || (1 + i % 100), 'evt_' || i, CASE WHEN i % 3 = 0 THEN 'user.deleted' ELSE 'user.created' END,
     '2026-0' || (1 + i % 9) || '-01T00:00:00.000Z',
     CASE WHEN (i / 100) % 10 = 0 THEN 'failed' WHEN (i / 100) % 10 = 1 THEN 'pending' ELSE 'delivered' END, 1, 1,
     CASE WHEN (i / 100) % 20 = 1 THEN '${PAST}' ELSE '${FUTURE}' END, NULL, '${AT}' FROM n`,
  `INSERT INTO delivery_attempts (stream_id, event_id, seq, status, timestamp, error_message, duration)
   SELECT stream_id, event_id, 1, CASE WHEN status = 'failed' THEN 'failed' ELSE 'delivered' END, '${AT}', NULL, 10
   FROM deliveries`,
  // One stream (est_4000, no other deliveries) delivered every event, each attempt at a time of its own:
  // a stream whose attempts outnumber a page many times over, as a busy stream's do.
  `INSERT INTO deliveries (stream_id, event_id, event_type, event_time, status, attempt_count, attempt_seq,
     next_attempt_at, claimed_until, updated_at)
   ${numbers} SELECT 'est_4000', 'evt_' || i, 'user.created', '${AT}', 'delivered', 1, 1, '${FUTURE}', NULL, '${AT}' FROM n`,
  `INSERT INTO delivery_attempts (stream_id, event_id, seq, status, timestamp, error_message, duration)
   ${numbers} SELECT 'est_4000', 'evt_' || i, 1, 'delivered',
     '2026-06-0' || (1 + i % 9) || 'T00:00:00.' || substr(CAST(1000 + i % 1000 AS TEXT), 2, 3) || 'Z', NULL, 10 FROM n`,
  // One in a hundred of them failed and was queued again (a redelivery), and waits for its attempt.
  `${numbers} UPDATE delivery_attempts SET status = 'failed'
   WHERE stream_id = 'est_4000' AND event_id IN (SELECT 'evt_' || i FROM n WHERE i % 100 = 0)`,
  `${numbers} UPDATE deliveries SET status = 'pending', attempt_count = 0, attempt_seq = 2, updated_at = '2026-06-09T12:00:00.000Z'
   WHERE stream_id = 'est_4000' AND event_id IN (SELECT 'evt_' || i FROM n WHERE i % 100 = 0)`,
  // A hundred streams' counts, 40 minutes each.
  `INSERT INTO delivery_counts (stream_id, minute, delivered, failed)
   ${numbers} SELECT 'est_' || (1 + i % 100), '2026-06-01T00:' || substr(CAST(100 + i / 100 AS TEXT), 2, 2), i % 7, i % 3
   FROM n`,
  `INSERT INTO email_outbox (id, tenant_id, template, recipient, sender, subject, body, status, attempt_count,
     next_attempt_at, claimed_until, last_error, created_at, updated_at, sent_at)
   ${numbers} SELECT 'eml_' || i, 't1', 'verify_email', 'u' || i || '@example.com', 'no-reply@example.com', 's',
     NULL, CASE WHEN i % 20 = 0 THEN 'pending' ELSE 'sent' END, 0,
     CASE WHEN i % 40 = 0 THEN '${PAST}' ELSE '${FUTURE}' END, NULL, NULL, '${AT}', '${AT}', NULL FROM n`,
  `INSERT INTO custom_domains (id, tenant_id, domain, type, status, is_primary, verification_record, created_at,
     next_check_at, check_count)
   ${numbers} SELECT 'cd_' || i, 't' || (i % 50), 'd' || i || '.example', 'self_managed_certs',
     CASE WHEN i % 3 = 0 THEN 'ready' WHEN i % 3 = 1 THEN 'pending_verification' ELSE 'failed' END, 0, 'txt',
     '${AT}', CASE WHEN i % 3 = 1 THEN CASE WHEN i % 30 = 1 THEN '${PAST}' ELSE '${FUTURE}' END END, 0 FROM n`,
  `INSERT INTO custom_domain_certificates (custom_domain_id, source, certificate, private_key, fingerprint, not_before,
     not_after, updated_at)
   SELECT id, 'upload', 'pem', 'sealed', 'fp', '${AT}', '${FUTURE}', '${AT}' FROM custom_domains`,
  // Redeliveries being queued in the background, none due yet (a node holds each, or waits to retry it).
  `INSERT INTO event_stream_redeliveries (id, stream_id, tenant_id, event_types, time_from, time_to, after_event_id,
     until_event_id, queued, status, next_attempt_at, claimed_until, created_at)
   ${numbers} SELECT 'r' || i, 'est_' || i, 't' || (i % 50), NULL, NULL, NULL, 'evt_1', 'evt_9', 1, 'pending',
     '${FUTURE}', NULL, '${AT}' FROM n`,
];

type Stores = (database: Database) => Promise<unknown>;

interface Case {
  name: string;
  /** The tables (with the aliases the SQL gives them) none of whose rows may be read by a full scan. */
  tables: Record<string, readonly string[]>;
  /** Indexes every statement reading `table` must go through, where a looser one would still pass as a search. */
  index?: { table: string; name: string } | ReadonlyArray<{ table: string; name: string }>;
  run: Stores;
}

const deliveries = (database: Database, chunkRows = 2000, lanes = 1) =>
  new Deliveries(database, new StreamStore(database), new DeliveryStore(database), async () => undefined, {
    store: new RedeliveryStore(database),
    chunkRows,
    lanes,
    recorded: () => undefined,
  });

/** Runs a claimed redelivery (or lane) chunk by chunk, one delivery a chunk, until it ends: at most 10. */
async function walkToEnd(database: Database, claimed: ClaimedRedelivery): Promise<void> {
  const chunk = redeliveryChunk(database, { chunkRows: 1 }, async () => undefined);
  let redelivery = claimed;
  let cursor = redeliveryCursor(redelivery);
  for (let i = 0; i < 10; i++) {
    const outcome = await chunk(redelivery, FUTURE, cursor);
    assert.ok(outcome, 'the lease held');
    if (outcome.finished) return;
    redelivery = { ...redelivery, lease: FUTURE };
    cursor = outcome.cursor;
  }
  assert.fail('the redelivery ended');
}

const CASES: Case[] = [
  {
    name: 'users-by-email',
    tables: { users: ['users'] },
    run: (database) => new UserStore(database).byEmail('t10', 'u10@example.com'),
  },
  {
    name: 'user by id',
    tables: { users: ['users'] },
    run: (database) => new UserStore(database).get('t10', 'auth0|u10'),
  },
  {
    // The window claims here; at a time before every due delivery it finds none and the walk of the
    // streams runs too, so the plans of both are checked.
    name: 'delivery claim (event streams): the window, then the walk of the streams',
    tables: {
      deliveries: ['deliveries', 'd', 'x'],
      events: ['events', 'e'],
      event_streams: ['event_streams', 's'],
    },
    run: async (database) => {
      const limits = { limit: 32, perStream: 4, reserve: 8, breakerFailures: 10, running: new Map([['est_2', 1]]) };
      assert.ok((await claimDue(database, { leaseMs: 30_000 }, limits)).length > 0);
      assert.deepEqual(await claimDue(database, { leaseMs: 30_000, at: '2000-01-01T00:00:00.000Z' }, limits), []);
    },
  },
  {
    name: 'mail outbox claim',
    tables: { email_outbox: ['email_outbox', 't'] },
    run: (database) => new OutboxStore(database).claimDue(10, 30_000),
  },
  {
    name: 'custom-domain re-check claim',
    tables: { custom_domains: ['custom_domains', 't'] },
    run: (database) => new CustomDomainStore(database).claimDueChecks(30_000, 10),
  },
  {
    name: 'failed-delivery log, unfiltered, then its next page',
    index: { table: 'deliveries', name: 'deliveries_failed' },
    tables: { deliveries: ['deliveries'], events: ['events'], delivery_attempts: ['delivery_attempts'] },
    run: async (database) => {
      await deliveries(database).list('t11', 'est_11', { take: 5 });
      await deliveries(database).list('t11', 'est_11', { take: 5, from: encodeCursor('evt_2222222222222222222222') });
    },
  },
  {
    name: 'failed-delivery log, by event type and time window',
    index: { table: 'deliveries', name: 'deliveries_failed' },
    tables: { deliveries: ['deliveries'], events: ['events'], delivery_attempts: ['delivery_attempts'] },
    run: (database) =>
      deliveries(database).list('t11', 'est_11', {
        statuses: 'failed',
        event_types: 'user.created,user.deleted',
        date_from: '2026-02-01T00:00:00Z',
        date_to: '2026-08-01T00:00:00Z',
      }),
  },
  {
    name: 'redelivery of a window',
    index: { table: 'deliveries', name: 'deliveries_failed' },
    tables: { deliveries: ['deliveries'] },
    run: async (database) => {
      await deliveries(database).redeliver('t21', 'est_21', {
        event_types: ['user.created'],
        date_from: '2026-02-01T00:00:00Z',
        date_to: '2026-08-01T00:00:00Z',
      });
      await deliveries(database).redeliver('t31', 'est_31', {});
    },
  },
  {
    // The request's first step records the rest (est_51 has four failed deliveries: chunks of one),
    // which is claimed and queued on chunk by chunk.
    name: 'redelivery in chunks: the first step, the claim of the rest, its chunks',
    index: { table: 'deliveries', name: 'deliveries_failed' },
    tables: {
      deliveries: ['deliveries'],
      event_stream_redeliveries: ['event_stream_redeliveries', 't', 'r'],
      event_streams: ['s'],
    },
    run: async (database) => {
      await deliveries(database, 1).redeliver('t1', 'est_51', {});
      const claimed = await new RedeliveryStore(database).claimDue(30_000, 10);
      assert.deepEqual(
        claimed.map((r) => r.stream_id),
        ['est_51'],
      );
      await walkToEnd(database, claimed[0]!);
    },
  },
  {
    // The same in two lanes: the first claim cuts the row by rows (a count and a seek on
    // deliveries_failed), then each lane is walked chunk by chunk.
    name: 'redelivery in two lanes: the cut, the claim of the lanes, the chunks of each',
    index: { table: 'deliveries', name: 'deliveries_failed' },
    tables: {
      deliveries: ['deliveries'],
      event_stream_redeliveries: ['event_stream_redeliveries', 't', 'r'],
      event_streams: ['s'],
    },
    run: async (database) => {
      await deliveries(database, 1, 2).redeliver('t2', 'est_52', {});
      const store = new RedeliveryStore(database);
      const chunk = redeliveryChunk(database, { chunkRows: 1 }, async () => undefined);
      const [whole] = await store.claimDue(30_000, 10);
      assert.deepEqual([whole?.stream_id, whole?.lanes], ['est_52', 2]);
      const cut = await chunk(whole!, FUTURE, redeliveryCursor(whole!));
      assert.equal(cut?.cursor.lanes, 1, 'cut');
      await store.release({ ...whole!, lease: FUTURE }, FUTURE, '2000-01-01T00:00:00.000Z');
      const lanes = await store.claimDue(30_000, 10);
      assert.equal(lanes.length, 2);
      for (const lane of lanes) await walkToEnd(database, lane);
    },
  },
  {
    name: 'count of a redelivery window (what it would queue)',
    index: { table: 'deliveries', name: 'deliveries_failed' },
    tables: { deliveries: ['deliveries'] },
    run: (database) =>
      deliveries(database).count('t11', 'est_11', {
        event_types: 'user.created',
        date_from: '2026-02-01T00:00:00Z',
        date_to: '2026-08-01T00:00:00Z',
      }),
  },
  {
    // The window's minutes of the stream's counts, on their primary key; the backlog on deliveries_due.
    name: "a stream's delivery statistics: its counts over a day, and its backlog",
    tables: { delivery_counts: ['delivery_counts'], deliveries: ['deliveries'] },
    run: (database) =>
      deliveries(database).stats('t11', 'est_11', {
        date_from: '2026-05-31T12:00:00Z',
        date_to: '2026-06-01T12:00:00Z',
      }),
  },
  {
    // Both directions on delivery_attempts_stream_time (the latest first, then only those after a cursor),
    // each attempt's event type from its delivery by primary key; the retrying attempts of the deliveries
    // queued again and waiting, on deliveries_requeued.
    name: "a stream's attempts as they are recorded: the latest, then those after a cursor",
    index: [
      { table: 'delivery_attempts', name: 'delivery_attempts_stream_time' },
      { table: 'deliveries', name: 'deliveries_requeued' },
    ],
    tables: { delivery_attempts: ['delivery_attempts', 'a'], deliveries: ['deliveries', 'd'] },
    run: async (database) => {
      await deliveries(database).attempts('t0', 'est_4000', { take: 50 });
      await deliveries(database).attempts('t0', 'est_4000', {
        take: 50,
        after: encodeCursor('2026-06-05T00:00:00.500Z evt_2222222222222222222222 1'),
      });
    },
  },
  {
    // email_outbox_tenant_created; with a status no row has, PostgreSQL may start from email_outbox_due.
    name: "a tenant's emails, newest first, then the next page",
    tables: { email_outbox: ['email_outbox'] },
    run: async (database) => {
      const store = new OutboxStore(database);
      await store.page('t1', {}, 51);
      await store.page('t1', { status: 'failed', before: { createdAt: AT, id: 'eml_2000' } }, 51);
    },
  },
  {
    name: 'redelivery of one event',
    tables: { deliveries: ['deliveries'], delivery_attempts: ['delivery_attempts'] },
    run: (database) => deliveries(database).redeliverOne('t41', 'est_41', 'evt_40'),
  },
  {
    name: 'custom domain of a Host (tenant resolution)',
    tables: { custom_domains: ['custom_domains'], custom_domain_certificates: ['certificates'] },
    run: (database) => new CustomDomainStore(database).readyHost('d3.example'),
  },
  {
    // What a list of custom domains reads of their certificates: one statement for the list, which holds
    // at most CUSTOM_DOMAINS_MAX (20) domains without take. (PostgreSQL reads the fixture's 4000 rows of a
    // few bytes in one sequential sweep rather than look up 50 or more; stored certificates are kilobytes.)
    name: "certificates of a page of custom domains (the records' certificate member)",
    tables: { custom_domain_certificates: ['custom_domain_certificates'] },
    run: async (database) => {
      const ids = Array.from({ length: 20 }, (_, i) => `cd_${3 + 150 * i}`);
      assert.equal((await new CustomDomainStore(database).certificateDates(ids)).length, 20);
    },
  },
  {
    name: 'custom domain by hostname, within its tenant and among ready ones',
    tables: { custom_domains: ['custom_domains'] },
    run: (database) => {
      const store = new CustomDomainStore(database);
      return store.transaction(async (trx) => {
        await store.findByHostname(trx, 't4', 'd4.example', true);
        await store.readyElsewhere(trx, { id: 'cd_4', domain: 'd3.example' });
      });
    },
  },
  {
    name: 'tenant by domain',
    tables: { tenants: ['tenants'] },
    run: (database) => new TenantStore(database).byDomain('t7.example'),
  },
];

/** A plan's lines: SQLite's `detail` strings, or PostgreSQL's nodes as `<Node Type> <Relation Name> <Index Name>`. */
interface Plan {
  lines: string[];
  /** Full reads of one of the case's tables. */
  scans: string[];
  /** Reads through an index (or the rowid). */
  searches: string[];
}

async function explain(database: Database, query: RecordedQuery, tables: Case['tables']): Promise<Plan> {
  const names = new Set(Object.entries(tables).flatMap(([table, aliases]) => [table, ...aliases]));
  if (database.sqlite) {
    const statement = database.sqlite.prepare(`EXPLAIN QUERY PLAN ${query.sql}`);
    const rows = (
      Array.isArray(query.parameters) ? statement.all(...query.parameters) : statement.all(query.parameters)
    ) as Array<{ detail: string }>;
    const lines = rows.map((r) => r.detail);
    return {
      lines,
      scans: lines.filter((l) => names.has(/^SCAN (\S+)/.exec(l)?.[1] ?? '')),
      searches: lines.filter((l) =>
        /^SEARCH \S+ USING (COVERING INDEX|INDEX|INTEGER PRIMARY KEY|PRIMARY KEY)\b/.test(l),
      ),
    };
  }
  // Inside a transaction rolled back, should EXPLAIN ever run what it plans.
  const client = await database.pool!.connect();
  try {
    await client.query('BEGIN');
    const result = await client.query<{ 'QUERY PLAN': Array<{ Plan: PgNode }> }>(
      `EXPLAIN (FORMAT JSON) ${query.sql}`,
      query.parameters as unknown[],
    );
    const nodes: PgNode[] = [];
    const walk = (node: PgNode) => {
      nodes.push(node);
      for (const child of node.Plans ?? []) walk(child);
    };
    walk(result.rows[0]!['QUERY PLAN'][0]!.Plan);
    const tableOf = (n: PgNode) => n['Relation Name'] ?? '';
    return {
      lines: nodes.map((n) => [n['Node Type'], n['Relation Name'], n['Index Name']].filter(Boolean).join(' ')),
      scans: nodes.filter((n) => n['Node Type'] === 'Seq Scan' && names.has(tableOf(n))).map((n) => tableOf(n)),
      searches: nodes
        .filter((n) => /^(Index Scan|Index Only Scan|Bitmap Index Scan)$/.test(n['Node Type']))
        .map((n) => `${n['Node Type']} ${n['Index Name']}`),
    };
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
}

interface PgNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PgNode[];
}

/** A LIMIT or OFFSET whose value is a bound parameter alone: `LIMIT ?`, `LIMIT :name`, `OFFSET $1`. */
const BARE_BOUND_LIMIT = /\b(?:limit|offset)\s+(?:\?|[:@$]\w+)/i;

/** Statements that read a table: what the plan is asked of. */
/** Statements that read rows: all but an INSERT of given values, which reads none (a row's insert has no plan). */
const isQuery = (q: RecordedQuery) =>
  /^\s*(select|insert|update|delete|with)\b/i.test(q.sql) && !/^\s*insert\b[^]*\)\s*values\s*\(/i.test(q.sql);

describe('query plans', () => {
  it("casts a subquery's limit once, and the query still limits", async () => {
    const database = openDatabase({ dataDir: '', sqliteMemory: true });
    try {
      await migrate(database);
      await sql`INSERT INTO tenants (id, domain, created_at) VALUES ('a', 'a.example', ${AT}), ('b', 'b.example', ${AT}), ('c', 'c.example', ${AT})`.execute(
        database.db,
      );
      const query = database.db
        .selectFrom('tenants')
        .select('id')
        .where('id', 'in', database.db.selectFrom('tenants').select('id').orderBy('id').limit(2))
        .orderBy('id')
        .limit(5)
        .offset(1);
      assert.equal((query.compile().sql.match(/CAST\(/g) ?? []).length, 3, query.compile().sql);
      assert.deepEqual(await query.execute(), [{ id: 'b' }]);
    } finally {
      await database.close();
    }
  });

  it('the bare-bound-limit check finds what it looks for', () => {
    for (const bare of ['select 1 limit ?', 'SELECT 1 LIMIT :limit', 'select 1 limit 5 offset ?', 'LIMIT $1']) {
      assert.match(bare, BARE_BOUND_LIMIT, bare);
    }
    for (const cast of ['select 1 limit CAST(? AS INTEGER)', 'LIMIT CAST(:cap AS INTEGER)', 'limit 5', 'LIMIT 1']) {
      assert.doesNotMatch(cast, BARE_BOUND_LIMIT, cast);
    }
  });

  eachDatabase((kind) => {
    let testDatabase: TestDatabase;
    let database: Database;

    before(async () => {
      testDatabase = await createTestDatabase(kind);
      database = openDatabase({ databaseUrl: testDatabase.databaseUrl, dataDir: testDatabase.dataDir });
      await migrate(database);
      await database.db.transaction().execute(async (trx) => {
        for (const statement of FIXTURE) await sql.raw(statement).execute(trx);
      });
      if (kind === 'postgres') await sql`ANALYZE`.execute(database.db);
    });

    after(async () => {
      await database.close();
      await testDatabase.drop();
    });

    it('the fixture is what the plans are asked of: thousands of rows in each table checked', async () => {
      const tables = [
        'tenants',
        'users',
        'event_streams',
        'events',
        'deliveries',
        'delivery_attempts',
        'custom_domains',
        'custom_domain_certificates',
        'email_outbox',
        'event_stream_redeliveries',
      ] as const;
      for (const table of tables) {
        const { count } = await database.db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll<number>().as('count'))
          .executeTakeFirstOrThrow();
        assert.ok(Number(count) >= ROWS, `${table}: ${count} rows`);
      }
    });

    for (const c of CASES) {
      it(`${c.name}: every statement reads through an index, none scans ${Object.keys(c.tables).join(', ')}`, async () => {
        const recording = recordingDatabase(database);
        await c.run(recording.database);
        const queries = recording.queries.filter(isQuery);
        assert.ok(queries.length > 0, 'the store issued no statement');
        const indexes = c.index === undefined ? [] : [c.index].flat();
        const checked = new Set<string>();
        for (const query of queries) {
          const plan = await explain(database, query, c.tables);
          const shown = `${query.sql}\n  plan: ${plan.lines.join(' | ')}`;
          if (process.env.SHOW_PLANS) process.stderr.write(`${c.name}: ${shown}\n\n`);
          assert.deepEqual(plan.scans, [], `full scan in\n${shown}`);
          // SQLite compiles a statement again whenever a bare bound LIMIT or OFFSET is bound (db/sqlite-limit.ts).
          if (kind === 'sqlite') assert.doesNotMatch(query.sql, BARE_BOUND_LIMIT, `bare bound limit in\n${shown}`);
          assert.ok(plan.searches.length > 0, `no index used in\n${shown}`);
          for (const index of indexes) {
            // The table the statement reads first (its own, not a subquery's).
            if (/\b(?:from|update)\s+"?([a-z_]+)/i.exec(query.sql)?.[1] !== index.table) continue;
            const through = plan.searches.filter((line) => line.includes(index.name));
            assert.ok(through.length > 0, `${index.name} not used in\n${shown}`);
            checked.add(index.name);
          }
        }
        for (const index of indexes) assert.ok(checked.has(index.name), `no statement read ${index.table}`);
      });
    }
  });
});
