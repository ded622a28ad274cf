import type { FastifyInstance } from 'fastify';
import { registerFormat } from '../../../http/validation.ts';
import { idPattern } from '../../../ids.ts';
import type { Services } from '../../../services.ts';
import { CustomDomainHeaders } from '../domain-context.ts';
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
      schema: { tags, operationId: 'getJob', params: JobId, response: { 200: JobResponse }, summary: 'Get a job' },
    },
    async (request) => services.jobs.get(request.tenant.id, request.params.id),
  );
}
