import type { FastifyInstance } from 'fastify';
import type { Services } from '../../services.ts';
import {
  CreateSegmentBody,
  EvaluationResponse,
  ListSegmentsQuery,
  ListSegmentsResponse,
  SegmentId,
  SegmentResponse,
  SignInContext,
  UpdateSegmentBody,
  type SegmentType,
} from './schema.ts';

const BASE = '/api/v2/experimentation/segments';
const tags = ['experimentation'];

export async function segmentRoutes(app: FastifyInstance, services: Pick<Services, 'segments'>): Promise<void> {
  const segments = services.segments;

  app.post<{ Body: CreateSegmentBody }>(
    BASE,
    {
      config: { scopes: ['create:experimentation'] },
      schema: {
        tags,
        operationId: 'createSegment',
        summary: 'Create a segment',
        body: CreateSegmentBody,
        response: { 201: SegmentResponse },
      },
    },
    async (request, reply) => reply.code(201).send(await segments.create(request.tenant.id, request.body)),
  );

  app.get<{ Querystring: ListSegmentsQuery }>(
    BASE,
    {
      config: { scopes: ['read:experimentation'] },
      schema: {
        tags,
        operationId: 'listSegments',
        summary: 'List segments',
        querystring: ListSegmentsQuery,
        response: { 200: ListSegmentsResponse },
      },
    },
    async (request) => {
      const { from, take, type } = request.query;
      const wanted: SegmentType | undefined = type === 'auth0' ? 'svc' : type;
      return segments.list(request.tenant.id, { from, take, type: wanted });
    },
  );

  app.get<{ Params: SegmentId }>(
    `${BASE}/:id`,
    {
      config: { scopes: ['read:experimentation'] },
      schema: {
        tags,
        operationId: 'getSegment',
        summary: 'Get a segment',
        params: SegmentId,
        response: { 200: SegmentResponse },
      },
    },
    async (request) => segments.get(request.tenant.id, request.params.id),
  );

  app.patch<{ Params: SegmentId; Body: UpdateSegmentBody }>(
    `${BASE}/:id`,
    {
      config: { scopes: ['update:experimentation'] },
      schema: {
        tags,
        operationId: 'updateSegment',
        summary: 'Update a segment',
        params: SegmentId,
        body: UpdateSegmentBody,
        response: { 200: SegmentResponse },
      },
    },
    async (request) => segments.update(request.tenant.id, request.params.id, request.body),
  );

  app.delete<{ Params: SegmentId }>(
    `${BASE}/:id`,
    {
      config: { scopes: ['delete:experimentation'] },
      schema: { tags, operationId: 'deleteSegment', summary: 'Delete a segment', params: SegmentId },
    },
    async (request, reply) => {
      await segments.delete(request.tenant.id, request.params.id);
      return reply.code(204).send();
    },
  );

  app.post<{ Params: SegmentId; Body: SignInContext }>(
    `${BASE}/:id/evaluate`,
    {
      config: { scopes: ['read:experimentation'] },
      schema: {
        tags,
        operationId: 'evaluateSegment',
        summary: 'Evaluate a segment against a sign-in context (not in the original)',
        params: SegmentId,
        body: SignInContext,
        response: { 200: EvaluationResponse },
      },
    },
    async (request) => segments.evaluate(request.tenant.id, request.params.id, request.body),
  );
}
