import { createTestDatabase, type TestDatabase } from '../test/helpers/databases.ts';
import { api, processToken, startServerProcess, type ServerProcess } from '../test/helpers/server-process.ts';
import type { Ledger } from './burst.ts';
import { startTally, type ReceiverMode, type Tally } from './tally.ts';

export type Kind = 'sqlite' | 'postgres';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Delivery settings for quick recovery: a killed node's leases run out in 2 s, sends time out after 1 s,
 * and loopback receivers are allowed. A failing delivery has 8 attempts over about 20 s: a machine so
 * loaded that the receiver misses a few timeouts in a row must not turn a late answer into a failed
 * delivery (the outage scenario, which wants its deliveries to fail, sets a short schedule of its own).
 */
export const DELIVERY_ENV = {
  DELIVERY_ALLOW_HTTP: 'true',
  DELIVERY_TIMEOUT_MS: '1000',
  DELIVERY_LEASE_MS: '2000',
  DELIVERY_POLL_MS: '50',
  DELIVERY_RETRY_SCHEDULE_MS: '100,200,400,800,1600,3200,6400',
};

/** Gives up after 4 attempts within about 5 s (timeouts included): for deliveries meant to fail. */
export const SHORT_RETRY_SCHEDULE_MS = '100,200,400';

/** Longest a node may take to start. */
const START_TIMEOUT_MS = 60_000;

/** Rejects when `promise` has not settled within `ms`. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<never>(
      (_, reject) => (timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), ms)),
    );
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Whether `server` has exited by now. */
export async function hasExited(server: ServerProcess): Promise<boolean> {
  return Promise.race([server.exited.then(() => true), sleep(0).then(() => false)]);
}

/**
 * What one scenario runs on: a fresh database, the receivers and the server processes it started.
 * `close` ends all of them, whatever state the scenario left them in.
 */
export class Rig {
  private readonly servers = new Set<ServerProcess>();
  private readonly tallies: Tally[] = [];
  private readonly cleanups: Array<() => void> = [];

  private constructor(
    readonly kind: Kind,
    readonly database: TestDatabase,
  ) {}

  static async open(kind: Kind): Promise<Rig> {
    return new Rig(kind, await createTestDatabase(kind));
  }

  async start(env: Record<string, string> = DELIVERY_ENV): Promise<ServerProcess> {
    const server = await startServerProcess(this.database, env, {
      stderr: 'collect',
      logs: 'warnings',
      readyWithinMs: START_TIMEOUT_MS,
    });
    this.servers.add(server);
    void server.exited.then(() => this.servers.delete(server));
    return server;
  }

  async tally(options: { delayMs?: number; mode?: ReceiverMode } = {}): Promise<Tally> {
    const tally = await startTally(options);
    this.tallies.push(tally);
    return tally;
  }

  async token(server: ServerProcess): Promise<string> {
    return within(processToken(server), 20_000, 'token');
  }

  /** A stream of user.created to `url`; returns its id. */
  async stream(server: ServerProcess, token: string, name: string, url: string): Promise<string> {
    const created = await api(server, token, 'POST', '/event-streams', {
      name,
      subscriptions: [{ event_type: 'user.created' }],
      destination: {
        type: 'webhook',
        configuration: { webhook_endpoint: url, webhook_authorization: { method: 'bearer', token: 'chaos-token' } },
      },
    });
    if (created.status !== 201)
      throw new Error(`stream not created: ${created.status} ${JSON.stringify(created.body)}`);
    return created.body.id;
  }

  /**
   * What the servers logged at warn and error, and wrote to stderr, one entry per distinct headline (first
   * 160 characters): indented lines (stack frames, error fields) left out.
   */
  errorLines(servers: Iterable<ServerProcess>): string[] {
    const lines = [...servers].flatMap((s) => [
      ...s.warnings(),
      ...s
        .stderr()
        .split('\n')
        .filter((l) => /^[^\s{}]/.test(l)),
    ]);
    return [...new Set(lines.map((l) => l.slice(0, 160)))];
  }

  /** Runs `cleanup` on close, once the servers are gone and before the database is dropped (an unmount). */
  defer(cleanup: () => void): void {
    this.cleanups.unshift(cleanup);
  }

  async close(): Promise<void> {
    for (const server of this.servers) await server.kill();
    for (const tally of this.tallies) await tally.close();
    for (const cleanup of this.cleanups) cleanup();
    await this.database.drop();
  }
}

/**
 * Waits until every acknowledged user's user.created event was accepted by `tally`, or `deadlineMs`
 * passes; `every` (a recovery step such as a redelivery) runs once per `everyMs` meanwhile.
 */
export async function settle(
  ledger: Ledger,
  tally: Tally,
  deadlineMs: number,
  every?: { ms: number; action: () => Promise<unknown> },
): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  let last = Date.now();
  while (Date.now() < deadline) {
    if ([...ledger.created].every((user) => tally.users.has(user))) return;
    if (every && Date.now() - last >= every.ms) {
      last = Date.now();
      await every.action().catch(() => undefined);
    }
    await sleep(50);
  }
}

/** Waits until `tally` has received nothing for `quietMs` (sends still on their way are counted), at most `deadlineMs`. */
export async function quiet(tally: Tally, quietMs: number, deadlineMs: number): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  let seen = tally.received();
  let since = Date.now();
  while (Date.now() < deadline && Date.now() - since < quietMs) {
    await sleep(50);
    if (tally.received() !== seen) {
      seen = tally.received();
      since = Date.now();
    }
  }
}
