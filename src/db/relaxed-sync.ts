import type BetterSqlite3 from 'better-sqlite3';

/** The level a connection was opened with, when above NORMAL; null at NORMAL or below (nothing to relax). */
const levels = new WeakMap<BetterSqlite3.Database, number | null>();

function levelOf(sqlite: BetterSqlite3.Database): number | null {
  let level = levels.get(sqlite);
  if (level === undefined) {
    const read = sqlite.pragma('synchronous', { simple: true }) as number;
    level = read > 1 ? read : null;
    levels.set(sqlite, level);
  }
  return level;
}

/**
 * Runs `write` (synchronous: one transaction, committed before it returns) without waiting for the
 * disk: synchronous NORMAL for it alone, the connection's own level restored before anything else can
 * use it (no await in between). For the delivery worker's own bookkeeping — a claim's leases and the
 * record of the attempts — whose loss to a power cut or an OS crash (a process crash loses nothing in
 * WAL mode) sends a delivery again rather than losing one: a lease lost makes its delivery claimable at
 * once, a record lost leaves it leased until the lease runs out, and either way it is sent again
 * (at-least-once). The next commit that waits for the disk (an API write) syncs the log with these
 * commits' pages in it: WAL is written in order. With SQLITE_SYNCHRONOUS=full each paid a sync,
 * 80–190 µs of CPU and 200–470 µs of waiting on the reference machine (docs/benchmarks.md).
 */
export function withoutSync<T>(sqlite: BetterSqlite3.Database, write: () => T): T {
  const level = levelOf(sqlite);
  if (level === null) return write();
  // exec, not a statement prepared once: SQLite applies this PRAGMA as it compiles it, so preparing
  // both statements up front set NORMAL and then the level back at once, and the first run did nothing.
  sqlite.exec('PRAGMA synchronous = NORMAL');
  try {
    return write();
  } finally {
    sqlite.exec(`PRAGMA synchronous = ${level}`);
  }
}
