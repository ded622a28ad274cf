import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { parseFields, ProjectionQuery } from '../../http/projection.ts';
import type { Services } from '../../services.ts';
import { CustomDomainHeaders } from '../email-verification/domain-context.ts';
import { profileMembers, type User } from './user.ts';

const UserId = Type.Object(
  { id: Type.String({ minLength: 1, maxLength: 255, description: 'ID of the user' }) },
  { additionalProperties: false },
);

const CreateUserBody = Type.Object(
  {
    connection: Type.String({
      minLength: 1,
      maxLength: 128,
      description: 'Name of the connection this user should be created in.',
    }),
    password: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
    user_id: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    verify_email: Type.Optional(
      Type.Boolean({
        description:
          'Whether a verification email is sent (true) or not (false); when absent, one is sent unless email_verified is true.',
      }),
    ),
    ...profileMembers,
  },
  { additionalProperties: false },
);

const UpdateUserBody = Type.Object({ ...profileMembers }, { additionalProperties: false, minProperties: 1 });

const UsersByEmailQuery = Type.Object(
  {
    email: Type.String({
      format: 'email',
      maxLength: 320,
      description: 'Email address to search for (case-sensitive).',
    }),
    ...ProjectionQuery,
  },
  { additionalProperties: false },
);

const UserResponse = Type.Object({ user_id: Type.String() }, { additionalProperties: true });

function readOptions(request: FastifyRequest, query: { fields?: string; include_fields?: boolean }) {
  return {
    fields: parseFields(query.fields),
    includeFields: query.include_fields ?? true,
    withIdpTokens: request.principal?.scopes.has('read:user_idp_tokens') ?? false,
  };
}

export async function userRoutes(
  app: FastifyInstance,
  services: Pick<Services, 'users' | 'verificationEmails'>,
): Promise<void> {
  app.get<{ Querystring: Static<typeof UsersByEmailQuery> }>(
    '/api/v2/users-by-email',
    {
      config: { scopes: ['read:users'] },
      schema: {
        tags: ['users'],
        operationId: 'listUsersByEmail',
        summary: 'Search users by email',
        querystring: UsersByEmailQuery,
        response: { 200: Type.Array(UserResponse) },
      },
    },
    async (request, reply) => {
      const json = await services.users.findByEmailJson(
        request.tenant.id,
        request.query.email,
        readOptions(request, request.query),
      );
      return reply.type('application/json; charset=utf-8').send(json);
    },
  );

  app.post<{ Body: Static<typeof CreateUserBody>; Headers: CustomDomainHeaders }>(
    '/api/v2/users',
    {
      config: { scopes: ['create:users'] },
      schema: {
        tags: ['users'],
        operationId: 'createUser',
        headers: CustomDomainHeaders,
        body: CreateUserBody,
        response: { 201: UserResponse },
        summary:
          'Create a user; a verification email goes out unless verify_email is false (or, without it, email_verified is true)',
      },
    },
    async (request, reply) => {
      // Resolved first, as the original does even when no email goes out: a bad header creates nothing.
      const context = await services.verificationEmails.domainContext(request.tenant, request.headers);
      // When the request asks for one, the verification email is rendered before the user's transaction
      // and queued in it (its ticket and its outbox row).
      const verificationEmail = await services.verificationEmails.forNewUser(request.tenant, request.body, context);
      const user: User = await services.users.create(request.tenant.id, request.body, verificationEmail);
      return reply.code(201).send(user);
    },
  );

  app.get<{ Params: Static<typeof UserId>; Querystring: { fields?: string; include_fields?: boolean } }>(
    '/api/v2/users/:id',
    {
      config: { scopes: ['read:users'] },
      schema: {
        tags: ['users'],
        operationId: 'getUser',
        summary: 'Get a user',
        params: UserId,
        querystring: Type.Object(ProjectionQuery, { additionalProperties: false }),
        response: { 200: UserResponse },
      },
    },
    async (request) => services.users.get(request.tenant.id, request.params.id, readOptions(request, request.query)),
  );

  app.patch<{ Params: Static<typeof UserId>; Body: Static<typeof UpdateUserBody> }>(
    '/api/v2/users/:id',
    {
      config: { scopes: ['update:users'] },
      schema: {
        tags: ['users'],
        operationId: 'updateUser',
        summary: 'Update a user',
        params: UserId,
        body: UpdateUserBody,
        response: { 200: UserResponse },
      },
    },
    async (request) => services.users.update(request.tenant.id, request.params.id, request.body),
  );

  app.delete<{ Params: Static<typeof UserId> }>(
    '/api/v2/users/:id',
    {
      config: { scopes: ['delete:users'] },
      schema: { tags: ['users'], operationId: 'deleteUser', summary: 'Delete a user', params: UserId },
    },
    async (request, reply) => {
      await services.users.delete(request.tenant.id, request.params.id);
      return reply.code(204).send();
    },
  );
}
