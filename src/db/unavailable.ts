/**
 * Database failures that are conditions rather than faults: the disk is full, the file system is
 * read-only, the connection was lost. They pass, by themselves or once an operator acts, so a client
 * should hear "try again later" (503 with Retry-After), and the operator the driver's own code.
 */
export interface DatabaseUnavailable {
  /** The driver's code, as the logs name it: `SQLITE_FULL`, `57P01`, `ECONNREFUSED`, … */
  code: string;
  errorCode:
    'insufficient_storage' | 'database_read_only' | 'database_io_error' | 'database_busy' | 'database_unavailable';
  message: string;
  retryAfterSeconds: number;
}

/** Conditions an operator must clear (space, mounts, hardware): a client gains nothing retrying within seconds. */
const STORAGE_RETRY_SECONDS = 30;
/** Conditions that pass by themselves: a lock released, a connection replaced, a failover done. */
const TRANSIENT_RETRY_SECONDS = 1;

type Condition = Omit<DatabaseUnavailable, 'code'>;

function condition(errorCode: Condition['errorCode'], message: string, retryAfterSeconds: number): Condition {
  return { errorCode, message, retryAfterSeconds };
}

const STORAGE_FULL = condition(
  'insufficient_storage',
  'The database is out of disk space; try again later.',
  STORAGE_RETRY_SECONDS,
);
const READ_ONLY = condition(
  'database_read_only',
  'The database is read-only at the moment (its storage refuses writes); try again later.',
  STORAGE_RETRY_SECONDS,
);
const IO_ERROR = condition(
  'database_io_error',
  'The database could not read or write its storage; try again later.',
  STORAGE_RETRY_SECONDS,
);
const BUSY = condition('database_busy', 'The database is busy; try again later.', TRANSIENT_RETRY_SECONDS);
const CONNECTION_LOST = condition(
  'database_unavailable',
  'The database cannot be reached or its connection was lost; try again later.',
  TRANSIENT_RETRY_SECONDS,
);

/** PostgreSQL SQLSTATEs; class 08 (connection exception) is matched as a whole. */
const POSTGRES_STATES: Record<string, Condition> = {
  '53100': STORAGE_FULL, // disk_full
  '25006': READ_ONLY, // read_only_sql_transaction: a standby, or a primary demoted by a failover
  '58030': IO_ERROR, // io_error
  '53300': BUSY, // too_many_connections
  // A transaction chosen to end a deadlock, or one that could not be serialized: the same request again
  // finds the other transaction done.
  '40P01': BUSY, // deadlock_detected
  '40001': BUSY, // serialization_failure
  '57P01': CONNECTION_LOST, // admin_shutdown: pg_terminate_backend, a fast shutdown
  '57P02': CONNECTION_LOST, // crash_shutdown
  '57P03': CONNECTION_LOST, // cannot_connect_now: starting up, shutting down, in recovery
};

/** Socket errors on the way to the database server. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** node-postgres reports a connection that ended under it with these messages and no code. */
const POSTGRES_CONNECTION_MESSAGES = new RegExp(
  `^(${[
    'Connection terminated',
    'Client has encountered a connection error',
    'Client was closed and is not queryable',
    'timeout exceeded when trying to connect',
  ].join('|')})`,
);

function sqliteCondition(code: string): Condition | undefined {
  if (code === 'SQLITE_FULL') return STORAGE_FULL;
  if (code.startsWith('SQLITE_READONLY')) return READ_ONLY;
  if (code.startsWith('SQLITE_IOERR') || code.startsWith('SQLITE_CANTOPEN')) return IO_ERROR;
  if (code.startsWith('SQLITE_BUSY')) return BUSY;
  return undefined;
}

/** What a database error says of the database's state, when it is one of the conditions above; undefined otherwise. */
export function databaseUnavailable(error: unknown): DatabaseUnavailable | undefined {
  if (!(error instanceof Error)) return undefined;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') {
    const condition = code.startsWith('SQLITE_')
      ? sqliteCondition(code)
      : (POSTGRES_STATES[code] ??
        (/^08[0-9A-Z]{3}$/.test(code) || NETWORK_CODES.has(code) ? CONNECTION_LOST : undefined));
    return condition && { code, ...condition };
  }
  if (POSTGRES_CONNECTION_MESSAGES.test(error.message)) return { code: 'connection_lost', ...CONNECTION_LOST };
  return undefined;
}
