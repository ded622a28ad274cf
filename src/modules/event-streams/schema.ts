import { Type, type Static } from '@sinclair/typebox';
import { registerFormat } from '../../http/validation.ts';
import { idPattern } from '../../ids.ts';

/** Event types a stream can subscribe to (spec section 6, plus the SDK's connection.*). */
export const EVENT_TYPES = [
  'group.created',
  'group.deleted',
  'group.updated',
  'group.member.added',
  'group.member.deleted',
  'group.role.assigned',
  'group.role.deleted',
  'organization.created',
  'organization.deleted',
  'organization.updated',
  'organization.connection.added',
  'organization.connection.removed',
  'organization.connection.updated',
  'organization.group.role.assigned',
  'organization.group.role.deleted',
  'organization.member.added',
  'organization.member.deleted',
  'organization.member.role.assigned',
  'organization.member.role.deleted',
  'user.created',
  'user.deleted',
  'user.updated',
  'connection.created',
  'connection.deleted',
  'connection.updated',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

const EventTypeSchema = Type.Unsafe<EventType>({ type: 'string', enum: [...EVENT_TYPES], maxLength: 33 });

export const StreamId = Type.Object(
  { id: Type.String({ format: 'event-stream-id', description: 'Unique identifier for the event stream' }) },
  { additionalProperties: false },
);
export type StreamId = Static<typeof StreamId>;

export const StreamEventId = Type.Object(
  {
    id: Type.String({ format: 'event-stream-id', description: 'Unique identifier for the event stream' }),
    event_id: Type.String({ format: 'event-id', description: 'Unique identifier for the event' }),
  },
  { additionalProperties: false },
);
export type StreamEventId = Static<typeof StreamEventId>;

/** Secrets (token, password, header_value) are accepted here and never returned. */
const Authorization = Type.Object(
  {
    method: Type.Union([Type.Literal('bearer'), Type.Literal('basic'), Type.Literal('custom_header')]),
    token: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
    username: Type.Optional(Type.String({ minLength: 1, maxLength: 128, pattern: '^[^:]+$' })),
    password: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
    header_key: Type.Optional(Type.String({ minLength: 1, maxLength: 256, pattern: "^[a-zA-Z0-9!#$%&'*+.^_`|~-]+$" })),
    header_value: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
  },
  { additionalProperties: false },
);
export type Authorization = Static<typeof Authorization>;

export const Destination = Type.Object(
  {
    type: Type.Union([Type.Literal('webhook'), Type.Literal('eventbridge'), Type.Literal('action')]),
    configuration: Type.Object(
      {
        webhook_endpoint: Type.Optional(
          Type.String({ minLength: 1, maxLength: 2048, description: 'URL of the webhook' }),
        ),
        webhook_authorization: Type.Optional(Authorization),
      },
      { additionalProperties: true },
    ),
  },
  { additionalProperties: false },
);
export type Destination = Static<typeof Destination>;

const Name = Type.String({ minLength: 1, maxLength: 128, description: 'Name of the event stream.' });
const Subscriptions = Type.Array(Type.Object({ event_type: EventTypeSchema }, { additionalProperties: false }), {
  minItems: 1,
  maxItems: 100,
});
const Status = Type.Union([Type.Literal('enabled'), Type.Literal('disabled')]);

export const CreateStreamBody = Type.Object(
  {
    name: Type.Optional(Name),
    subscriptions: Type.Optional(Subscriptions),
    destination: Destination,
    status: Type.Optional(Status),
  },
  { additionalProperties: false },
);
export type CreateStreamBody = Static<typeof CreateStreamBody>;

export const UpdateStreamBody = Type.Object(
  {
    name: Type.Optional(Name),
    subscriptions: Type.Optional(Subscriptions),
    destination: Type.Optional(Destination),
    status: Type.Optional(Status),
  },
  { additionalProperties: false },
);
export type UpdateStreamBody = Static<typeof UpdateStreamBody>;

export const ListQuery = Type.Object(
  {
    from: Type.Optional(Type.String({ maxLength: 256, description: 'Cursor from which to start selection' })),
    take: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 100, description: 'Number of results per page. Defaults to 50.' }),
    ),
  },
  { additionalProperties: false },
);
export type ListQuery = Static<typeof ListQuery>;

const DateTime = Type.String({ format: 'date-time', maxLength: 20 });

export const DeliveriesQuery = Type.Object(
  {
    statuses: Type.Optional(Type.String({ maxLength: 64, description: 'Comma-separated list of delivery statuses' })),
    event_types: Type.Optional(Type.String({ maxLength: 2048, description: 'Comma-separated list of event types' })),
    date_from: Type.Optional(DateTime),
    date_to: Type.Optional(DateTime),
    from: Type.Optional(Type.String({ maxLength: 256, description: 'Cursor from which to start selection' })),
    take: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 100, description: 'Number of results per page. Defaults to 50.' }),
    ),
  },
  { additionalProperties: false },
);
export type DeliveriesQuery = Static<typeof DeliveriesQuery>;

export const RedeliverBody = Type.Object(
  {
    date_from: Type.Optional(DateTime),
    date_to: Type.Optional(DateTime),
    statuses: Type.Optional(Type.Array(Type.Literal('failed'))),
    event_types: Type.Optional(Type.Array(EventTypeSchema)),
  },
  { additionalProperties: false },
);
export type RedeliverBody = Static<typeof RedeliverBody>;

export const TestBody = Type.Object(
  { event_type: EventTypeSchema, data: Type.Optional(Type.Object({}, { additionalProperties: true })) },
  { additionalProperties: false },
);
export type TestBody = Static<typeof TestBody>;

// ---------------------------------------------------------------------------------------------
// Standard Webhooks signing secrets (a Tenantry extension: the original has no such operations)

registerFormat('signing-secret-id', idPattern.signingSecret);

export const SigningSecretParams = Type.Object(
  {
    id: Type.String({ format: 'event-stream-id', description: 'Unique identifier for the event stream' }),
    secret_id: Type.String({ format: 'signing-secret-id', description: 'Unique identifier for the signing secret' }),
  },
  { additionalProperties: false },
);
export type SigningSecretParams = Static<typeof SigningSecretParams>;

/** Thirty days: a rotation's overlap is for switching receivers over, not for keeping two secrets. */
const MAX_OVERLAP_SECONDS = 30 * 24 * 3600;

export const CreateSigningSecretBody = Type.Object(
  {
    overlap_seconds: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_OVERLAP_SECONDS,
        description:
          'How long the secret being replaced keeps signing alongside the new one, in seconds (default 86400; 0: not at all).',
      }),
    ),
  },
  { additionalProperties: false },
);
export type CreateSigningSecretBody = Static<typeof CreateSigningSecretBody>;

export const SigningSecret = Type.Object(
  {
    id: Type.String({ description: 'Unique identifier for the signing secret' }),
    created_at: Type.String({ format: 'date-time' }),
    expires_at: Type.Optional(
      Type.String({ format: 'date-time', description: 'When a replaced secret stops signing' }),
    ),
  },
  { additionalProperties: false },
);
export type SigningSecret = Static<typeof SigningSecret>;

export const SigningSecretCreated = Type.Object(
  {
    id: Type.String({ description: 'Unique identifier for the signing secret' }),
    secret: Type.String({ description: 'whsec_ and the base64 key: shown this once, never again' }),
    created_at: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);
export type SigningSecretCreated = Static<typeof SigningSecretCreated>;

export const SigningSecretList = Type.Object(
  { signing_secrets: Type.Array(SigningSecret, { description: 'Every secret signing deliveries, newest first' }) },
  { additionalProperties: false },
);
export type SigningSecretList = Static<typeof SigningSecretList>;

// ---------------------------------------------------------------------------------------------
// Delivery statistics (the original's shape, with the backlog and health added) and counts (Tenantry)

/**
 * The sizes of a statistics bucket, in seconds: an hour and a day as the original chooses them by the
 * window's length, and a minute, which only a client asking for it gets (a Tenantry extension).
 */
export const STATS_SCALE_FACTORS = [60, 3600, 86400] as const;
export type StatsScaleFactor = (typeof STATS_SCALE_FACTORS)[number];

/**
 * An offset and fractional seconds, as clients in any time zone send them: `…T10:00:00.000+01:00` (29
 * characters), Python's microseconds (32), Java's nanoseconds (35).
 */
const DATE_TIME_WITH_OFFSET = 35;

export const StatsQuery = Type.Object(
  {
    date_from: Type.Optional(
      Type.String({
        format: 'date-time',
        maxLength: DATE_TIME_WITH_OFFSET,
        description:
          'Start of the window, cut to its hour (its minute with scale_factor 60); default: 14 days before date_to (3 hours with scale_factor 60)',
      }),
    ),
    date_to: Type.Optional(
      Type.String({
        format: 'date-time',
        maxLength: DATE_TIME_WITH_OFFSET,
        description:
          'End of the window, cut to its hour (its minute with scale_factor 60); its bucket is counted whole. Default: the end of the current hour (minute)',
      }),
    ),
    scale_factor: Type.Optional(
      Type.Union(
        STATS_SCALE_FACTORS.map((seconds) => Type.Literal(seconds)),
        {
          description:
            'Tenantry: the bucket size in seconds, 60, 3600 or 86400. Without it, hours for a window of up to 24 hours and days for a longer one, as the original',
        },
      ),
    ),
  },
  { additionalProperties: false },
);
export type StatsQuery = Static<typeof StatsQuery>;

const StatsMetric = Type.Object(
  {
    name: Type.Union([
      Type.Literal('svc.event_streams.successful_deliveries'),
      Type.Literal('svc.event_streams.failed_deliveries'),
    ]),
    window_total: Type.Integer({ description: 'The sum of data' }),
    type: Type.Literal('sum'),
    data: Type.Array(Type.Integer(), { description: 'Attempts in each bucket, index for index with buckets' }),
  },
  { additionalProperties: false },
);

export const StreamStats = Type.Object(
  {
    id: Type.String(),
    name: Type.Optional(Type.String()),
    window: Type.Object(
      {
        date_from: Type.String({ format: 'date-time' }),
        date_to: Type.String({ format: 'date-time' }),
        bucket_interval: Type.Object(
          { scale_factor: Type.Integer({ description: 'Seconds per bucket' }) },
          { additionalProperties: false },
        ),
      },
      { additionalProperties: false },
    ),
    buckets: Type.Array(Type.String({ format: 'date-time' }), {
      description: 'The start of every bucket of the window, oldest first, whether it holds attempts or not',
    }),
    metrics: Type.Array(StatsMetric, {
      description: 'Attempts that delivered (successful_deliveries), then attempts that failed (failed_deliveries)',
    }),
    backlog: Type.Object(
      {
        pending: Type.Integer({ description: 'Tenantry: deliveries waiting for an attempt, counted up to 10000' }),
        oldest_due_at: Type.Optional(Type.String({ format: 'date-time' })),
      },
      { additionalProperties: false },
    ),
    health: Type.Object(
      {
        consecutive_failures: Type.Integer({
          description: 'Tenantry: failed attempts since the last delivered one',
        }),
        circuit_open_until: Type.Optional(
          Type.String({ format: 'date-time', description: 'Deliveries are paused until then' }),
        ),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);
export type StreamStats = Static<typeof StreamStats>;

export const DeliveryCountQuery = Type.Object(
  {
    statuses: Type.Optional(Type.String({ maxLength: 64, description: 'Comma-separated list of delivery statuses' })),
    event_types: Type.Optional(Type.String({ maxLength: 2048, description: 'Comma-separated list of event types' })),
    date_from: Type.Optional(DateTime),
    date_to: Type.Optional(DateTime),
  },
  { additionalProperties: false },
);
export type DeliveryCountQuery = Static<typeof DeliveryCountQuery>;

export const DeliveryCount = Type.Object(
  { count: Type.Integer({ description: 'Failed deliveries matching the filter: what a redelivery of it queues' }) },
  { additionalProperties: false },
);
export type DeliveryCount = Static<typeof DeliveryCount>;

// ---------------------------------------------------------------------------------------------
// A stream's attempts as they are recorded (a Tenantry extension: the console's live view)

export const ATTEMPTS_CURSOR_DESCRIPTION =
  'Cursor: only the attempts recorded after it, oldest first (the next of an earlier answer)';

export const AttemptsQuery = Type.Object(
  {
    after: Type.Optional(Type.String({ maxLength: 256, description: ATTEMPTS_CURSOR_DESCRIPTION })),
    take: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 100, description: 'Number of attempts per answer. Defaults to 50.' }),
    ),
  },
  { additionalProperties: false },
);
export type AttemptsQuery = Static<typeof AttemptsQuery>;

export const StreamAttempt = Type.Object(
  {
    event_id: Type.String({ description: 'The event delivered' }),
    event_type: Type.String(),
    seq: Type.Integer({ description: "The attempt's number among the delivery's attempts, from 1" }),
    status: Type.Union([Type.Literal('delivered'), Type.Literal('failed'), Type.Literal('retrying')], {
      description: 'retrying: a redelivery was queued (no request was sent)',
    }),
    timestamp: Type.String({
      format: 'date-time',
      description: 'When the attempt ended (or the redelivery was queued)',
    }),
    error_message: Type.Optional(Type.String()),
    duration: Type.Optional(Type.Number({ description: 'Milliseconds' })),
  },
  { additionalProperties: false },
);
export type StreamAttempt = Static<typeof StreamAttempt>;

export const StreamAttempts = Type.Object(
  {
    attempts: Type.Array(StreamAttempt, {
      description:
        'Without after: the latest attempts, newest first. With after: those recorded after it, oldest first',
    }),
    next: Type.Optional(
      Type.String({
        description:
          'Cursor at the newest attempt given so far: pass it as after to get only newer ones (absent while the stream has none)',
      }),
    ),
  },
  { additionalProperties: false },
);
export type StreamAttempts = Static<typeof StreamAttempts>;
