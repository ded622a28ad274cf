import type { FastifyInstance } from 'fastify';
import type { Services } from '../../services.ts';
import {
  ConnectionId,
  ConnectionResponse,
  GetConnectionQuery,
  ListConnectionsQuery,
  ListConnectionsResponse,
} from './schema.ts';

const BASE = '/api/v2/connections';
const tags = ['connections'];

/** Read-only: a tenant's connections, so that a connection's id can be found through the API. */
export async function connectionRoutes(app: FastifyInstance, services: Pick<Services, 'connections'>): Promise<void> {
  const connections = services.connections;

  app.get<{ Querystring: ListConnectionsQuery }>(
    BASE,
    {
      config: { scopes: ['read:connections'] },
      schema: {
        tags,
        operationId: 'listConnections',
        summary: 'List connections',
        querystring: ListConnectionsQuery,
        response: { 200: ListConnectionsResponse },
      },
    },
    async (request) => connections.list(request.tenant.id, request.query),
  );

  app.get<{ Params: ConnectionId; Querystring: GetConnectionQuery }>(
    `${BASE}/:id`,
    {
      config: { scopes: ['read:connections'] },
      schema: {
        tags,
        operationId: 'getConnection',
        summary: 'Get a connection',
        params: ConnectionId,
        querystring: GetConnectionQuery,
        response: { 200: ConnectionResponse },
      },
    },
    async (request) => connections.get(request.tenant.id, request.params.id, request.query),
  );
}
