import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../config.ts';
import { openDatabase, type Database } from '../db/database.ts';
import { AttemptLog, type AttemptLine, type AttemptScope } from '../modules/event-streams/attempt-log.ts';
import { parseFlags, printRow, UsageError } from './args.ts';
import { requireTenantIn } from './clients.ts';

const POLL_MS = 500;
/**
 * An attempt's timestamp is taken just before its transaction commits, so one taken earlier may
 * become visible after a later one. Each look reaches this far back and skips attempts already shown.
 */
const LATE_COMMIT_WINDOW_MS = 10_000;

export async function eventsCommand([sub, ...args]: string[]): Promise<void> {
  switch (sub) {
    case 'tail': {
      const flags = parseFlags('events tail', args, ['tenant', 'stream']);
      return tail({ tenant: flags.string('tenant'), stream: flags.string('stream') });
    }
    default:
      throw new UsageError(`events: expected "tail", got ${sub === undefined ? 'nothing' : `"${sub}"`}`);
  }
}

/**
 * Prints one line per delivery attempt as the workers record them, read from the server's database,
 * until SIGINT or SIGTERM. It opens the database only: no delivery worker runs in this process.
 */
async function tail(filter: AttemptScope): Promise<void> {
  const database = openDatabase(loadConfig());
  const attempts = new AttemptLog(database);
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await checkFilter(database, attempts, filter);
    const scope = [filter.tenant && `tenant ${filter.tenant}`, filter.stream && `stream ${filter.stream}`]
      .filter(Boolean)
      .join(', ');
    process.stderr.write(`Following delivery attempts${scope ? ` of ${scope}` : ''} (Ctrl-C to stop)\n`);
    const started = new Date().toISOString();
    let latest = started;
    const shown = new Map<string, string>();
    while (!stop.signal.aborted) {
      const windowStart = new Date(Date.parse(latest) - LATE_COMMIT_WINDOW_MS).toISOString();
      const since = windowStart > started ? windowStart : started;
      for (const attempt of await attempts.since(since, filter)) {
        const key = `${attempt.stream_id} ${attempt.event_id} ${attempt.seq}`;
        if (shown.has(key)) continue;
        shown.set(key, attempt.timestamp);
        if (attempt.timestamp > latest) latest = attempt.timestamp;
        printRow(...fields(attempt));
      }
      for (const [key, at] of shown) if (at < since) shown.delete(key);
      // Ended early by a signal: the loop's condition sees it.
      await sleep(POLL_MS, undefined, { signal: stop.signal }).catch(() => undefined);
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await database.close();
  }
}

async function checkFilter(database: Database, attempts: AttemptLog, filter: AttemptScope): Promise<void> {
  if (filter.tenant !== undefined) await requireTenantIn(database, filter.tenant);
  if (filter.stream !== undefined && !(await attempts.streamExists(filter.stream, filter.tenant))) {
    throw new UsageError(`no event stream "${filter.stream}"${filter.tenant ? ` on tenant ${filter.tenant}` : ''}`);
  }
}

/** time, stream, event, type, status, duration, and the error when there is one: a line's values. */
function fields(a: AttemptLine): string[] {
  const duration = a.duration === null ? '-' : `${Math.round(Number(a.duration))}ms`;
  return [
    a.timestamp,
    a.stream_id,
    a.event_id,
    a.event_type,
    a.status,
    duration,
    ...(a.error_message ? [a.error_message] : []),
  ];
}
