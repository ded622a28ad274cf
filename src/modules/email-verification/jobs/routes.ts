import { Readable } from 'node:stream';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { registerFormat } from '../../../http/validation.ts';
import { idPattern } from '../../../ids.ts';
import type { Services } from '../../../services.ts';
import { CustomDomainHeaders } from '../domain-context.ts';
import { UsersImportFailure, UsersImportJob } from '../../users-imports/schema.ts';
import { JobId, JobResponse, VerificationEmailJobBody } from './schema.ts';

const tags = ['jobs'];

export async function jobRoutes(
  app: FastifyInstance,
  services: Pick<Services, 'jobs' | 'verificationEmails'>,
): Promise<void> {
  registerFormat('job-id', idPattern.job);

  app.post<{ Body: VerificationEmailJobBody; Headers: CustomDomainHeaders }>(
    '/api/v2/jobs/verification-email',
    {
      config: { scopes: ['update:users'] },
      schema: {
        tags,
        operationId: 'createVerificationEmailJob',
        headers: CustomDomainHeaders,
        body: VerificationEmailJobBody,
        response: { 201: JobResponse },
        summary: 'Send the user a verification email, its link on the selected custom domain',
      },
    },
    async (request, reply) => {
      const context = await services.verificationEmails.domainContext(request.tenant, request.headers);
      return reply.code(201).send(await services.jobs.createVerificationEmail(request.tenant, request.body, context));
    },
  );

  app.get<{ Params: JobId }>(
    '/api/v2/jobs/:id',
    {
      config: { scopes: ['create:users', 'read:users'] },
      schema: {
        tags,
        operationId: 'getJob',
        params: JobId,
        response: { 200: Type.Union([JobResponse, UsersImportJob]) },
        summary: 'Get a job',
      },
    },
    async (request) => services.jobs.get(request.tenant.id, request.params.id),
  );

  app.get<{ Params: JobId }>(
    '/api/v2/jobs/:id/errors',
    {
      config: { scopes: ['create:users', 'read:users'] },
      schema: {
        tags,
        operationId: 'getJobErrors',
        params: JobId,
        response: {
          200: Type.Union([Type.Array(UsersImportFailure), JobResponse, UsersImportJob]),
          204: Type.Null({ description: 'The job has no errors' }),
        },
        summary: "Get a job's errors: the records a users import refused, or the job when it failed",
      },
    },
    async (request, reply) => {
      const errors = await services.jobs.errors(request.tenant.id, request.params.id);
      if (errors === undefined) return reply.code(204).send();
      // A users import's refused records stream out as JSON, a page at a time.
      if (errors instanceof Readable) return reply.type('application/json; charset=utf-8').send(errors);
      return errors;
    },
  );
}
