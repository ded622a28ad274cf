import { now } from '../../db/database.ts';
import { decodeCursor, encodeCursor } from '../../http/cursor.ts';
import { connectionErrors } from '../../http/errors.ts';
import { parseFields, project } from '../../http/projection.ts';
import { idPattern, newId } from '../../ids.ts';
import { present, storedStrategies, type ConnectionRecord } from './connection.ts';
import type { GetConnectionQuery, ListConnectionsQuery } from './schema.ts';
import type { ConnectionFilter, ConnectionStore } from './store.ts';

export interface Connection {
  id: string;
  name: string;
  /** `svc` for the server's own username/password database; otherwise the upstream provider's name. */
  strategy: string;
}

type Listed = Partial<ConnectionRecord>;

/** What GET /connections answers: a bare array, an offset page with totals, or a checkpoint page. */
export type ConnectionList =
  | Listed[]
  | { start: number; limit: number; total: number; connections: Listed[] }
  | { connections: Listed[]; next?: string };

/** Entries per page when the request names none, for either pagination. */
const DEFAULT_PAGE = 50;

/** The tenant's connections: where its users' identities live. */
export class ConnectionService {
  constructor(private readonly store: ConnectionStore) {}

  async byName(tenantId: string, name: string): Promise<Connection | undefined> {
    return this.store.byName(tenantId, name);
  }

  /** The tenant's connection with this id; another tenant's is as absent as one that never existed. */
  async byId(tenantId: string, id: string): Promise<Connection | undefined> {
    return this.store.byId(tenantId, id);
  }

  /** Returns the named connection, creating it with the strategy given when it does not exist yet. */
  async ensure(tenantId: string, name: string, strategy: string): Promise<Connection> {
    const existing = await this.byName(tenantId, name);
    if (existing) return existing;
    const connection = { id: newId.connection(), name, strategy };
    await this.store.insertUnlessNamed(tenantId, connection, now());
    return (await this.byName(tenantId, name)) ?? connection;
  }

  /** Another tenant's connection is as absent as one that never existed. */
  async get(tenantId: string, id: string, query: GetConnectionQuery): Promise<Listed> {
    const connection = await this.store.byId(tenantId, id);
    if (!connection) throw connectionErrors.notFound();
    return project(present(connection), parseFields(query.fields), query.include_fields ?? true);
  }

  /**
   * As the original: `from` or `take` select checkpoint pagination (`{connections, next}`, never totals);
   * otherwise `page`/`per_page` select an offset page, wrapped with its totals when include_totals is true.
   */
  async list(tenantId: string, query: ListConnectionsQuery): Promise<ConnectionList> {
    const filter: ConnectionFilter = {
      name: query.name,
      strategies: query.strategy === undefined ? undefined : storedStrategies(query.strategy),
    };
    const fields = parseFields(query.fields);
    const include = query.include_fields ?? true;
    const shape = (rows: Connection[]) => rows.map((c) => project(present(c), fields, include));

    if (query.from !== undefined || query.take !== undefined) {
      const take = query.take ?? DEFAULT_PAGE;
      const afterId =
        query.from === undefined ? undefined : decodeCursor(query.from, (id) => idPattern.connection.test(id));
      const rows = await this.store.list(tenantId, filter, { afterId, limit: take + 1 });
      const page = rows.slice(0, take);
      const last = page[page.length - 1];
      return { connections: shape(page), ...(rows.length > take && last ? { next: encodeCursor(last.id) } : {}) };
    }

    const limit = query.per_page ?? DEFAULT_PAGE;
    const start = (query.page ?? 0) * limit;
    const rows = await this.store.list(tenantId, filter, { offset: start, limit });
    if (query.include_totals !== true) return shape(rows);
    return { start, limit, total: await this.store.count(tenantId, filter), connections: shape(rows) };
  }
}
