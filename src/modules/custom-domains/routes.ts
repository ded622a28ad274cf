import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Services } from '../../services.ts';
import {
  CreateCustomDomainBody,
  CustomDomainCertificate,
  CustomDomainId,
  CustomDomainRecord,
  CustomDomainTest,
  ListCustomDomainsQuery,
  SetDefaultBody,
  UpdateCustomDomainBody,
  VerifiedCustomDomain,
} from './schema.ts';

const BASE = '/api/v2/custom-domains';
const tags = ['custom-domains'];

// Documentation only: responses are sent as JSON.stringify makes them (app.ts), in the records' own key order.
const CustomDomainList = Type.Union([
  Type.Array(CustomDomainRecord, { description: 'Without take or from' }),
  Type.Object(
    {
      custom_domains: Type.Array(CustomDomainRecord),
      next: Type.Optional(Type.String({ description: 'Cursor of the next page (from); absent on the last page' })),
    },
    { additionalProperties: false, description: 'With take or from' },
  ),
]);
const DefaultDomainResponse = Type.Union([
  CustomDomainRecord,
  Type.Object(
    { domain: Type.String({ description: 'The canonical domain, when it is the default' }) },
    { additionalProperties: false },
  ),
]);

export async function customDomainRoutes(
  app: FastifyInstance,
  services: Pick<Services, 'customDomains' | 'customDomainCertificates'>,
): Promise<void> {
  const domains = services.customDomains;
  const certificates = services.customDomainCertificates;

  app.post<{ Body: CreateCustomDomainBody }>(
    BASE,
    {
      config: { scopes: ['create:custom_domains'] },
      schema: {
        tags,
        operationId: 'createCustomDomain',
        summary: 'Add a custom domain',
        body: CreateCustomDomainBody,
        response: { 201: CustomDomainRecord },
      },
    },
    async (request, reply) => reply.code(201).send(await domains.create(request.tenant.id, request.body)),
  );

  app.get<{ Querystring: ListCustomDomainsQuery }>(
    BASE,
    {
      config: { scopes: ['read:custom_domains'] },
      schema: {
        tags,
        operationId: 'listCustomDomains',
        querystring: ListCustomDomainsQuery,
        summary: 'List custom domains (a bare array; {custom_domains, next} when take or from is given)',
        response: { 200: CustomDomainList },
      },
    },
    async (request) => domains.list(request.tenant.id, request.query),
  );

  // Static paths first: /default is never taken for an id (Fastify prefers static routes anyway).
  app.get(
    `${BASE}/default`,
    {
      config: { scopes: ['read:custom_domains'] },
      schema: {
        tags,
        operationId: 'getDefaultCustomDomain',
        summary: 'The default domain: a custom domain record, or {domain} for the canonical one',
        response: { 200: DefaultDomainResponse },
      },
    },
    async (request) => domains.getDefault(request.tenant),
  );

  app.patch<{ Body: SetDefaultBody }>(
    `${BASE}/default`,
    {
      config: { scopes: ['update:custom_domains'] },
      schema: {
        tags,
        operationId: 'setDefaultCustomDomain',
        summary: 'Set the default domain (a verified custom domain or the canonical one)',
        body: SetDefaultBody,
        response: { 200: DefaultDomainResponse },
      },
    },
    async (request) => domains.setDefault(request.tenant, request.body.domain),
  );

  app.get<{ Params: CustomDomainId }>(
    `${BASE}/:id`,
    {
      config: { scopes: ['read:custom_domains'] },
      schema: {
        tags,
        operationId: 'getCustomDomain',
        summary: 'Get a custom domain',
        params: CustomDomainId,
        response: { 200: CustomDomainRecord },
      },
    },
    async (request) => domains.get(request.tenant.id, request.params.id),
  );

  app.patch<{ Params: CustomDomainId; Body: UpdateCustomDomainBody }>(
    `${BASE}/:id`,
    {
      config: { scopes: ['update:custom_domains'] },
      schema: {
        tags,
        operationId: 'updateCustomDomain',
        summary: 'Update a custom domain; is_default true makes it the default',
        params: CustomDomainId,
        body: UpdateCustomDomainBody,
        response: { 200: CustomDomainRecord },
      },
    },
    async (request) => domains.update(request.tenant.id, request.params.id, request.body),
  );

  app.delete<{ Params: CustomDomainId }>(
    `${BASE}/:id`,
    {
      config: { scopes: ['delete:custom_domains'] },
      schema: { tags, operationId: 'deleteCustomDomain', summary: 'Delete a custom domain', params: CustomDomainId },
    },
    async (request, reply) => {
      await domains.delete(request.tenant.id, request.params.id);
      return reply.code(204).send();
    },
  );

  app.post<{ Params: CustomDomainId }>(
    `${BASE}/:id/verify`,
    {
      config: { scopes: ['create:custom_domains'] },
      schema: {
        tags,
        operationId: 'verifyCustomDomain',
        summary: 'Check the DNS record of a custom domain now',
        params: CustomDomainId,
        response: { 200: VerifiedCustomDomain },
      },
    },
    async (request) => domains.verify(request.tenant.id, request.params.id),
  );

  app.post<{ Params: CustomDomainId }>(
    `${BASE}/:id/test`,
    {
      config: { scopes: ['read:custom_domains'] },
      schema: {
        tags,
        operationId: 'testCustomDomain',
        summary: "Check a ready custom domain's DNS record again, changing nothing",
        params: CustomDomainId,
        response: { 200: CustomDomainTest },
      },
    },
    async (request) => domains.test(request.tenant.id, request.params.id),
  );

  // A Tenantry extension: what the console's domain cards show.
  app.get<{ Params: CustomDomainId }>(
    `${BASE}/:id/certificate`,
    {
      config: { scopes: ['read:custom_domains'] },
      schema: {
        tags,
        operationId: 'getCustomDomainCertificate',
        summary:
          'The certificate served for the custom domain over TLS (names, issuer, validity, fingerprint; never its key), or none and why',
        params: CustomDomainId,
        response: { 200: CustomDomainCertificate },
      },
    },
    async (request) => certificates.describe(request.tenant.id, request.params.id),
  );
}
