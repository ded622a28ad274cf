import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { notFound, unauthorized } from '../http/errors.ts';
import { newId } from '../ids.ts';
import type { Services } from '../services.ts';
import type { Snapshot } from './service.ts';
import { RestoreBody, SnapshotBody, SnapshotResponse } from './schema.ts';

/** Named snapshots one server keeps at most; the oldest is dropped past it (each holds every row). */
const MAX_NAMED_SNAPSHOTS = 20;

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * POST /_tenantry/reset, /_tenantry/snapshot and /_tenantry/restore: the embedded API's reset,
 * snapshot() and restore() for test suites written in other languages. Registered only with
 * TENANTRY_DEV_ENDPOINTS=true (otherwise they do not exist: 404 however spelled). They belong to no
 * tenant, so they are declared public and tenantless, and check the operator token themselves.
 */
export async function snapshotRoutes(app: FastifyInstance, services: Pick<Services, 'config' | 'snapshots'>) {
  const { config, snapshots } = services;
  if (!config.devEndpoints || config.operatorToken === undefined) return;
  const expected = digest(config.operatorToken);
  const named = new Map<string, Snapshot>();

  const operatorOnly = async (request: FastifyRequest) => {
    const match = /^Bearer (.+)$/.exec(request.headers.authorization ?? '');
    // Compared as digests: equal lengths, and the time taken says nothing about the token.
    if (!match || !timingSafeEqual(digest(match[1]!), expected)) throw unauthorized('Invalid operator token');
  };
  const declared = { config: { public: true, tenantless: true }, onRequest: operatorOnly } as const;
  const schema = (body: object) => ({ hide: true, body, response: { 200: SnapshotResponse } });

  app.post('/_tenantry/reset', { ...declared, schema: { hide: true } }, async (_request, reply) => {
    await snapshots.reset();
    return reply.code(204).send();
  });

  app.post<{ Body: SnapshotBody | undefined }>(
    '/_tenantry/snapshot',
    { ...declared, schema: schema(SnapshotBody) },
    async (request) => {
      const name = request.body?.name ?? newId.requestId();
      const snapshot = await snapshots.snapshot();
      named.delete(name);
      named.set(name, snapshot);
      if (named.size > MAX_NAMED_SNAPSHOTS) named.delete(named.keys().next().value!);
      return { name, taken_at: snapshot.takenAt };
    },
  );

  app.post<{ Body: RestoreBody }>(
    '/_tenantry/restore',
    { ...declared, schema: schema(RestoreBody) },
    async (request) => {
      const snapshot = named.get(request.body.name);
      if (!snapshot) throw notFound.snapshot(request.body.name);
      await snapshots.restore(snapshot);
      return { name: request.body.name, taken_at: snapshot.takenAt };
    },
  );
}
