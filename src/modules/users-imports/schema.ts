import { Type, type Static } from '@sinclair/typebox';
import { registerFormat } from '../../http/validation.ts';
import { idPattern } from '../../ids.ts';
import { profileMembers } from '../users/user.ts';

registerFormat('connection-id', idPattern.connection);

/** The form members of POST /jobs/users-imports beside the `users` file, as the coerced form gives them. */
export const UsersImportFields = Type.Object(
  {
    connection_id: Type.String({
      format: 'connection-id',
      description: 'connection_id of the connection to which users will be imported',
    }),
    upsert: Type.Optional(
      Type.Boolean({ description: 'Whether to update users if they already exist (true) or to ignore them (false)' }),
    ),
    external_id: Type.Optional(Type.String({ minLength: 1, maxLength: 255, description: 'Customer-defined ID' })),
    send_completion_email: Type.Optional(
      Type.Boolean({
        description:
          'Whether to send a completion email to all tenant owners when the job is finished; accepted, and without effect here (a tenant has no owners)',
      }),
    ),
  },
  { additionalProperties: false },
);
export type UsersImportFields = Static<typeof UsersImportFields>;

/** The multipart body as the API reference shows it. */
export const UsersImportBody = Type.Object({
  users: Type.String({
    format: 'binary',
    description: 'A JSON array of users (or one user per line, NDJSON), as the original bulk-import schema',
  }),
  ...UsersImportFields.properties,
});

/** POST /jobs/users-imports: the job, pending. */
export const UsersImportCreated = Type.Object({
  status: Type.Literal('pending'),
  type: Type.Literal('users_import'),
  created_at: Type.String(),
  id: Type.String(),
  connection_id: Type.String(),
  external_id: Type.Optional(Type.String()),
});
export type UsersImportCreated = Static<typeof UsersImportCreated>;

export const UsersImportSummary = Type.Object({
  failed: Type.Integer(),
  updated: Type.Integer(),
  inserted: Type.Integer(),
  total: Type.Integer(),
});

/** GET /jobs/{id} of a users-import job. */
export const UsersImportJob = Type.Object({
  status: Type.Union([
    Type.Literal('pending'),
    Type.Literal('processing'),
    Type.Literal('completed'),
    Type.Literal('failed'),
  ]),
  type: Type.Literal('users_import'),
  created_at: Type.String(),
  id: Type.String(),
  connection_id: Type.String(),
  connection: Type.String(),
  external_id: Type.Optional(Type.String()),
  percentage_done: Type.Optional(Type.Integer({ description: 'While processing: the share of the file done' })),
  time_left_seconds: Type.Optional(Type.Integer({ description: 'While processing: the time left at the rate so far' })),
  status_details: Type.Optional(Type.String({ description: 'When failed: why' })),
  summary: Type.Optional(UsersImportSummary),
});
export type UsersImportJob = Static<typeof UsersImportJob>;

/** One record the job did not import, as the file gave it (without its password hash), and why. */
export const UsersImportFailure = Type.Object({
  user: Type.Record(Type.String(), Type.Unknown()),
  errors: Type.Array(Type.Object({ code: Type.String(), message: Type.String(), path: Type.Optional(Type.String()) })),
});
export type UsersImportFailure = Static<typeof UsersImportFailure>;

/**
 * One user of the file, as the original's bulk-import schema: its profile, an optional user_id and
 * password hash; the email is required. The connection is the job's.
 */
export const ImportedUserRecord = Type.Object(
  {
    ...profileMembers,
    email: Type.String({ format: 'email', maxLength: 320 }),
    user_id: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    password_hash: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
  },
  { additionalProperties: false },
);
export type ImportedUserRecord = Static<typeof ImportedUserRecord>;
