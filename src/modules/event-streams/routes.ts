import type { FastifyInstance } from 'fastify';
import type { Services } from '../../services.ts';
import {
  AttemptsQuery,
  CreateSigningSecretBody,
  CreateStreamBody,
  DeliveriesQuery,
  DeliveryCount,
  DeliveryCountQuery,
  ListQuery,
  RedeliverBody,
  SigningSecretCreated,
  SigningSecretList,
  SigningSecretParams,
  StatsQuery,
  StreamEventId,
  StreamAttempts,
  StreamId,
  StreamStats,
  TestBody,
  UpdateStreamBody,
} from './schema.ts';

const BASE = '/api/v2/event-streams';
const tags = ['event-streams'];

export async function eventStreamRoutes(app: FastifyInstance, deps: Pick<Services, 'eventStreams'>): Promise<void> {
  const { streams, testEvents, deliveries, signingSecrets } = deps.eventStreams;

  app.post<{ Body: CreateStreamBody }>(
    BASE,
    {
      config: { scopes: ['create:event_streams'] },
      schema: { tags, operationId: 'createEventStream', summary: 'Create an event stream', body: CreateStreamBody },
    },
    async (request, reply) => reply.code(201).send(await streams.create(request.tenant.id, request.body)),
  );

  app.get<{ Querystring: ListQuery }>(
    BASE,
    {
      config: { scopes: ['read:event_streams'] },
      schema: { tags, operationId: 'listEventStreams', summary: 'List event streams', querystring: ListQuery },
    },
    async (request) => streams.list(request.tenant.id, request.query),
  );

  app.get<{ Params: StreamId }>(
    `${BASE}/:id`,
    {
      config: { scopes: ['read:event_streams'] },
      schema: { tags, operationId: 'getEventStream', summary: 'Get an event stream', params: StreamId },
    },
    async (request) => streams.get(request.tenant.id, request.params.id),
  );

  app.patch<{ Params: StreamId; Body: UpdateStreamBody }>(
    `${BASE}/:id`,
    {
      config: { scopes: ['update:event_streams'] },
      schema: {
        tags,
        operationId: 'updateEventStream',
        summary: 'Update an event stream',
        params: StreamId,
        body: UpdateStreamBody,
      },
    },
    async (request) => streams.update(request.tenant.id, request.params.id, request.body),
  );

  app.delete<{ Params: StreamId }>(
    `${BASE}/:id`,
    {
      config: { scopes: ['delete:event_streams'] },
      schema: { tags, operationId: 'deleteEventStream', summary: 'Delete an event stream', params: StreamId },
    },
    async (request, reply) => {
      await streams.delete(request.tenant.id, request.params.id);
      return reply.code(204).send();
    },
  );

  app.post<{ Params: StreamId; Body: TestBody }>(
    `${BASE}/:id/test`,
    {
      config: { scopes: ['update:event_streams'] },
      schema: {
        tags,
        operationId: 'testEventStream',
        summary: 'Send a test event to a stream',
        params: StreamId,
        body: TestBody,
      },
    },
    async (request, reply) =>
      reply.code(202).send(await testEvents.send(request.tenant.id, request.params.id, request.body)),
  );

  app.get<{ Params: StreamId; Querystring: DeliveriesQuery }>(
    `${BASE}/:id/deliveries`,
    {
      config: { scopes: ['read:event_streams', 'read:event_deliveries'] },
      schema: {
        tags,
        operationId: 'listEventStreamDeliveries',
        summary: 'List failed deliveries',
        params: StreamId,
        querystring: DeliveriesQuery,
      },
    },
    async (request) => deliveries.list(request.tenant.id, request.params.id, request.query),
  );

  app.get<{ Params: StreamId; Querystring: StatsQuery }>(
    `${BASE}/:id/stats`,
    {
      config: { scopes: ['read:event_streams'] },
      schema: {
        tags,
        operationId: 'getEventStreamStats',
        summary:
          'Delivered and failed attempts per hour or day of a window (the original, not in its OpenAPI document), per minute on request, with the backlog and health',
        params: StreamId,
        querystring: StatsQuery,
        response: { 200: StreamStats },
      },
    },
    async (request) => deliveries.stats(request.tenant.id, request.params.id, request.query),
  );

  // Tenantry extensions: what a console's views need, available to every client of the API.

  app.get<{ Params: StreamId; Querystring: DeliveryCountQuery }>(
    `${BASE}/:id/deliveries/count`,
    {
      config: { scopes: ['read:event_streams', 'read:event_deliveries'] },
      schema: {
        tags,
        operationId: 'countEventStreamDeliveries',
        summary: 'Count failed deliveries matching the filters: what a redelivery of the same window queues',
        params: StreamId,
        querystring: DeliveryCountQuery,
        response: { 200: DeliveryCount },
      },
    },
    async (request) => deliveries.count(request.tenant.id, request.params.id, request.query),
  );

  app.get<{ Params: StreamId; Querystring: AttemptsQuery }>(
    `${BASE}/:id/attempts`,
    {
      config: { scopes: ['read:event_streams'] },
      schema: {
        tags,
        operationId: 'listEventStreamAttempts',
        summary:
          "The stream's delivery attempts as they are recorded: the latest, newest first; with after, only newer ones, oldest first",
        params: StreamId,
        querystring: AttemptsQuery,
        response: { 200: StreamAttempts },
      },
    },
    async (request) => deliveries.attempts(request.tenant.id, request.params.id, request.query),
  );

  app.get<{ Params: StreamEventId }>(
    `${BASE}/:id/deliveries/:event_id`,
    {
      config: { scopes: ['read:event_deliveries'] },
      schema: { tags, operationId: 'getEventStreamDelivery', summary: 'Get a delivery', params: StreamEventId },
    },
    async (request) => deliveries.get(request.tenant.id, request.params.id, request.params.event_id),
  );

  app.post<{ Params: StreamId; Body: RedeliverBody | undefined }>(
    `${BASE}/:id/redeliver`,
    {
      config: { scopes: ['update:event_deliveries'] },
      schema: {
        tags,
        operationId: 'redeliverEvents',
        summary: 'Redeliver failed deliveries',
        params: StreamId,
        body: RedeliverBody,
      },
    },
    async (request, reply) => {
      const filter = request.body ?? {};
      await deliveries.redeliver(request.tenant.id, request.params.id, filter);
      return reply.code(202).send(filter);
    },
  );

  app.post<{ Params: StreamEventId }>(
    `${BASE}/:id/redeliver/:event_id`,
    {
      config: { scopes: ['update:event_deliveries'] },
      schema: { tags, operationId: 'redeliverEvent', summary: 'Redeliver one failed delivery', params: StreamEventId },
    },
    async (request, reply) => {
      await deliveries.redeliverOne(request.tenant.id, request.params.id, request.params.event_id);
      return reply.code(202).send({});
    },
  );

  // Standard Webhooks signing (a Tenantry extension; the original's operations and shapes are untouched).

  app.get<{ Params: StreamId }>(
    `${BASE}/:id/signing-secrets`,
    {
      config: { scopes: ['read:event_streams'] },
      schema: {
        tags,
        operationId: 'listEventStreamSigningSecrets',
        summary: "List the secrets signing a stream's deliveries (never the secrets themselves)",
        params: StreamId,
        response: { 200: SigningSecretList },
      },
    },
    async (request) => signingSecrets.list(request.tenant.id, request.params.id),
  );

  app.post<{ Params: StreamId; Body: CreateSigningSecretBody }>(
    `${BASE}/:id/signing-secrets`,
    {
      config: { scopes: ['update:event_streams'] },
      // The body is optional: a bare POST rotates with the default overlap.
      preValidation: (request, _reply, done) => {
        request.body ??= {};
        done();
      },
      schema: {
        tags,
        operationId: 'createEventStreamSigningSecret',
        summary:
          'Sign deliveries with a new secret (Standard Webhooks); the previous one keeps signing for the overlap',
        params: StreamId,
        body: CreateSigningSecretBody,
        response: { 201: SigningSecretCreated },
      },
    },
    async (request, reply) =>
      reply.code(201).send(await signingSecrets.create(request.tenant.id, request.params.id, request.body)),
  );

  app.delete<{ Params: StreamId }>(
    `${BASE}/:id/signing-secrets`,
    {
      config: { scopes: ['update:event_streams'] },
      schema: {
        tags,
        operationId: 'deleteEventStreamSigningSecrets',
        summary: "Stop signing a stream's deliveries",
        params: StreamId,
      },
    },
    async (request, reply) => {
      await signingSecrets.deleteAll(request.tenant.id, request.params.id);
      return reply.code(204).send();
    },
  );

  app.delete<{ Params: SigningSecretParams }>(
    `${BASE}/:id/signing-secrets/:secret_id`,
    {
      config: { scopes: ['update:event_streams'] },
      schema: {
        tags,
        operationId: 'deleteEventStreamSigningSecret',
        summary: 'Stop signing with one secret',
        params: SigningSecretParams,
      },
    },
    async (request, reply) => {
      await signingSecrets.delete(request.tenant.id, request.params.id, request.params.secret_id);
      return reply.code(204).send();
    },
  );
}
