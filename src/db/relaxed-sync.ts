import type BetterSqlite3 from 'better-sqlite3';

/** A connection's statements that set its synchronous level, and the level it was opened with when above NORMAL. */
interface Levels {
  normal: BetterSqlite3.Statement;
  restore: BetterSqlite3.Statement;
}

const levels = new WeakMap<BetterSqlite3.Database, Levels | null>();

function levelsOf(sqlite: BetterSqlite3.Database): Levels | null {
  let found = levels.get(sqlite);
  if (found === undefined) {
    const level = sqlite.pragma('synchronous', { simple: true }) as number;
    // Prepared once: better-sqlite3's pragma() compiles its statement at every call.
    found =
      level > 1
        ? {
            normal: sqlite.prepare('PRAGMA synchronous = NORMAL'),
            restore: sqlite.prepare(`PRAGMA synchronous = ${level}`),
          }
        : null;
    levels.set(sqlite, found);
  }
  return found;
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
  const found = levelsOf(sqlite);
  if (found === null) return write();
  found.normal.run();
  try {
    return write();
  } finally {
    found.restore.run();
  }
}
