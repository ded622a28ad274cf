import type BetterSqlite3 from 'better-sqlite3';
import type { KyselyPlugin, QueryResult, RootOperationNode, UnknownRow } from 'kysely';
import type pg from 'pg';
import type { Database } from '../../src/db/database.ts';

/** One statement a store ran: its SQL and the values bound to it (positional, or named on SQLite). */
export interface RecordedQuery {
  sql: string;
  parameters: readonly unknown[] | Record<string, unknown>;
}

/**
 * A view of `database` that records every statement run through it, as the stores really issue them:
 * Kysely's queries (compiled by the database's own dialect), better-sqlite3 statements the stores
 * prepare themselves and named PostgreSQL statements sent through the pool. The statements still run.
 */
export function recordingDatabase(database: Database): { database: Database; queries: RecordedQuery[] } {
  const queries: RecordedQuery[] = [];
  const executor = database.db.getExecutor();
  const plugin: KyselyPlugin = {
    transformQuery({ node, queryId }) {
      const compiled = executor.compileQuery(node as RootOperationNode, queryId);
      queries.push({ sql: compiled.sql, parameters: [...compiled.parameters] });
      return node;
    },
    transformResult: async ({ result }): Promise<QueryResult<UnknownRow>> => result,
  };
  const view: Database = {
    ...database,
    db: database.db.withPlugin(plugin),
    ...(database.sqlite ? { sqlite: recordingSqlite(database.sqlite, queries) } : {}),
    ...(database.pool ? { pool: recordingPool(database.pool, queries) } : {}),
  };
  return { database: view, queries };
}

function recordingSqlite(sqlite: BetterSqlite3.Database, queries: RecordedQuery[]): BetterSqlite3.Database {
  return new Proxy(sqlite, {
    get(target, property) {
      if (property !== 'prepare') {
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      }
      return (source: string) => {
        const statement = target.prepare(source);
        return new Proxy(statement, {
          get(st, name) {
            const value: unknown = Reflect.get(st, name, st);
            if (typeof value !== 'function') return value;
            const method = (value as (...a: unknown[]) => unknown).bind(st);
            if (name !== 'all' && name !== 'get' && name !== 'run' && name !== 'iterate') return method;
            return (...args: unknown[]) => {
              const named = args.length === 1 && typeof args[0] === 'object' && args[0] !== null;
              queries.push({ sql: source, parameters: named ? (args[0] as Record<string, unknown>) : args });
              return method(...args);
            };
          },
        });
      };
    },
  });
}

function recordingPool(pool: pg.Pool, queries: RecordedQuery[]): pg.Pool {
  return new Proxy(pool, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      const method = (value as (...a: unknown[]) => unknown).bind(target);
      if (property !== 'query') return method;
      return (config: pg.QueryConfig | string, values?: unknown[]) => {
        if (typeof config === 'string') queries.push({ sql: config, parameters: values ?? [] });
        else queries.push({ sql: config.text, parameters: config.values ?? values ?? [] });
        return method(config, values);
      };
    },
  });
}
