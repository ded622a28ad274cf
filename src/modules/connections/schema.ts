import { Type, type Static } from '@sinclair/typebox';
import { ProjectionQuery } from '../../http/projection.ts';
import { registerFormat } from '../../http/validation.ts';
import { idPattern } from '../../ids.ts';

registerFormat('connection-id', idPattern.connection);

/** Longest page of either pagination, as the original's. */
export const MAX_PAGE = 100;

export const ConnectionId = Type.Object(
  { id: Type.String({ format: 'connection-id', description: 'The id of the connection to retrieve' }) },
  { additionalProperties: false },
);
export type ConnectionId = Static<typeof ConnectionId>;

export const GetConnectionQuery = Type.Object(ProjectionQuery, { additionalProperties: false });
export type GetConnectionQuery = Static<typeof GetConnectionQuery>;

export const ListConnectionsQuery = Type.Object(
  {
    per_page: Type.Optional(
      Type.Integer({ minimum: 1, maximum: MAX_PAGE, description: 'The amount of entries per page. Defaults to 50.' }),
    ),
    page: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000, description: 'The page number. Zero based' })),
    include_totals: Type.Optional(
      Type.Boolean({
        description:
          'true if a query summary must be included in the result, false otherwise. Not returned when using checkpoint pagination. Default false.',
      }),
    ),
    from: Type.Optional(Type.String({ maxLength: 1024, description: 'Optional Id from which to start selection.' })),
    take: Type.Optional(
      Type.Integer({ minimum: 1, maximum: MAX_PAGE, description: 'Number of results per page. Defaults to 50.' }),
    ),
    // A single value or the parameter repeated (the SDKs send `strategy=a&strategy=b`).
    strategy: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 128 }), {
        maxItems: 50,
        description: 'Provide strategies to only retrieve connections with such strategies',
      }),
    ),
    name: Type.Optional(
      Type.String({ minLength: 1, maxLength: 128, description: 'Provide the name of the connection to retrieve' }),
    ),
    ...ProjectionQuery,
  },
  { additionalProperties: false },
);
export type ListConnectionsQuery = Static<typeof ListConnectionsQuery>;

/** Every member is optional in the response: `fields` can leave any of them out. */
export const ConnectionResponse = Type.Object(
  {
    id: Type.Optional(Type.String({ description: "The connection's identifier" })),
    name: Type.Optional(Type.String({ description: 'The name of the connection' })),
    strategy: Type.Optional(
      Type.String({ description: 'The type of the connection, related to the identity provider' }),
    ),
    options: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    realms: Type.Optional(
      Type.Array(Type.String(), { description: 'The realms for which the connection is used: its name' }),
    ),
    is_domain_connection: Type.Optional(Type.Boolean({ description: 'True if the connection is domain level' })),
  },
  { additionalProperties: false },
);

export const ListConnectionsResponse = Type.Union([
  Type.Array(ConnectionResponse, { description: 'Without paging parameters, or with page/per_page' }),
  Type.Object(
    {
      start: Type.Integer(),
      limit: Type.Integer(),
      total: Type.Integer(),
      connections: Type.Array(ConnectionResponse),
    },
    { additionalProperties: false, description: 'With include_totals=true (offset pagination)' },
  ),
  Type.Object(
    {
      connections: Type.Array(ConnectionResponse),
      next: Type.Optional(Type.String({ description: 'Opaque cursor for `from`; absent on the last page' })),
    },
    { additionalProperties: false, description: 'With from or take (checkpoint pagination)' },
  ),
]);
