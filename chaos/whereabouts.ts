import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import type { TestDatabase } from '../test/helpers/databases.ts';

interface Row {
  data: string;
  status: string | null;
  attempt_count: number | null;
  next_attempt_at: string | null;
  claimed_until: string | null;
  attempts: string | null;
}

/**
 * Read straight from the database once a scenario is over: where each of `users`' user.created events
 * stands (no event, or its delivery's status, attempts, lease and the last attempts' errors), and the
 * streams' health. A scenario that lost events says with this which step dropped them.
 */
export async function whereabouts(database: TestDatabase, users: readonly string[]): Promise<string[]> {
  if (users.length === 0) return [];
  // The last three attempts of each delivery, newest first, as `status: error` lines.
  const attempts = (concat: string) =>
    `(SELECT ${concat} FROM (SELECT status, error_message, seq FROM delivery_attempts a
       WHERE a.stream_id = d.stream_id AND a.event_id = d.event_id ORDER BY seq DESC LIMIT 3) last)`;
  const events = `SELECT e.data, d.status, d.attempt_count, d.next_attempt_at, d.claimed_until, ATTEMPTS AS attempts
    FROM events e LEFT JOIN deliveries d ON d.event_id = e.id WHERE e.type = 'user.created'`;
  const streams = `SELECT status, status_reason, consecutive_failures, circuit_open_until FROM event_streams`;
  let rows: Row[];
  let streamRows: unknown[];
  if (database.kind === 'sqlite') {
    const db = new BetterSqlite3(path.join(database.dataDir, 'tenantry.sqlite'), { readonly: true });
    try {
      rows = db
        .prepare(
          events.replace('ATTEMPTS', attempts(`group_concat(status || coalesce(': ' || error_message, ''), ' | ')`)),
        )
        .all() as Row[];
      streamRows = db.prepare(streams).all();
    } finally {
      db.close();
    }
  } else {
    const client = new pg.Client({ connectionString: database.databaseUrl });
    await client.connect();
    try {
      rows = (
        await client.query<Row>(
          events.replace('ATTEMPTS', attempts(`string_agg(status || coalesce(': ' || error_message, ''), ' | ')`)),
        )
      ).rows;
      streamRows = (await client.query(streams)).rows;
    } finally {
      await client.end();
    }
  }
  const byUser = new Map(rows.map((row) => [JSON.parse(row.data).object.user_id as string, row]));
  const lines = users.map((user) => {
    const row = byUser.get(user);
    if (!row) return `lost ${user}: no user.created event stored`;
    if (row.status === null) return `lost ${user}: an event without a delivery`;
    return (
      `lost ${user}: ${row.status}, ${row.attempt_count} attempts, due ${row.next_attempt_at}, ` +
      `lease ${row.claimed_until ?? 'none'}, last: ${row.attempts ?? 'none'}`
    );
  });
  return [...lines, `streams: ${JSON.stringify(streamRows)}`];
}
