import { STATUS_CODES } from 'node:http';
import {
  missingPropertyMessage,
  payloadValidationMessage,
  queryValidationMessage,
  tooManyPropertiesMessage,
} from './validation/messages.ts';
import { LONE_SURROGATE_MESSAGE } from '../lone-surrogates.ts';
import type { DatabaseUnavailable } from '../db/unavailable.ts';

/**
 * The error catalogue: every error a client of the API can see is made by one of the named factories in
 * this file, so each of the original's messages is spelled once and each code is one of these.
 */
export type ErrorCode =
  | 'invalid_body'
  | 'inexistent_snapshot'
  | 'invalid_query_string'
  | 'invalid_uri'
  | 'invalid_header'
  | 'invalid_headers'
  | 'invalid_request'
  | 'request_timeout'
  | 'insufficient_scope'
  | 'inexistent_tenant'
  | 'inexistent_user'
  | 'inexistent_connection'
  | 'inexistent_custom_domain'
  | 'inexistent_job'
  | 'inexistent_email'
  | 'inexistent_segment'
  | 'invalid_cname_api_key'
  | 'operation_not_supported'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'too_many_requests'
  | 'svc_idp_error'
  | 'template_render_error'
  | 'segment_name_conflict'
  | 'custom_domain_conflict'
  | DatabaseUnavailable['errorCode'];

/**
 * The one error type of the API. Every failure a client sees is an ApiError rendered as
 * `{statusCode, error, message, errorCode?, attributes?}` — the original's shape and key order.
 */
export class ApiError extends Error {
  /** Set on refusals the operator should see as well as the client: the error handler logs them at warn. */
  logAtWarn = false;

  constructor(
    readonly statusCode: number,
    message: string,
    readonly errorCode?: ErrorCode,
    readonly attributes?: Record<string, unknown>,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'ApiError';
  }

  toBody(): ErrorBody {
    const body: ErrorBody = {
      statusCode: this.statusCode,
      error: STATUS_CODES[this.statusCode] ?? 'Error',
      message: this.message,
    };
    if (this.errorCode !== undefined) body.errorCode = this.errorCode;
    if (this.attributes !== undefined) body.attributes = this.attributes;
    return body;
  }
}

export interface ErrorBody {
  statusCode: number;
  error: string;
  message: string;
  errorCode?: ErrorCode;
  attributes?: Record<string, unknown>;
}

/** Named factories so that each of the original's messages is spelled in exactly one place. */
export const badRequest = {
  body: (message: string) => new ApiError(400, message, 'invalid_body'),
  query: (message: string) => new ApiError(400, message, 'invalid_query_string'),
  uri: (message: string) => new ApiError(400, message, 'invalid_uri'),
  malformedJson: () => new ApiError(400, 'Invalid request payload JSON format', 'invalid_body'),
  /** A string or member name holding half of a surrogate pair (see lone-surrogates.ts). */
  loneSurrogate: () => new ApiError(400, `Invalid request payload: ${LONE_SURROGATE_MESSAGE}`, 'invalid_body'),
  authorizationHeader: () => new ApiError(400, 'Bad HTTP authentication header format', 'invalid_header'),
  headers: (message: string) => new ApiError(400, message, 'invalid_headers'),
  /** RFC 9112 §3.2: two Host headers, or an absolute target naming another host than Host. */
  ambiguousHost: () =>
    new ApiError(
      400,
      'The request names its host more than once (two Host headers, or an absolute target naming another host).',
      'invalid_headers',
    ),
  /** The connection closed before the body arrived: nobody reads this answer (the error handler logs the request). */
  aborted: () => new ApiError(400, 'The connection closed before the request body arrived.', 'invalid_body'),
  /** Fastify's own refusal of a body it could not read, in the API's shape. */
  unreadableBody: (message: string) => new ApiError(400, message, 'invalid_body'),
  undecodablePath: () => new ApiError(400, 'The request path is not valid percent-encoded UTF-8.', 'invalid_uri'),
  // Checks a service makes after the schema passed, worded by the validator's formatter (validation/messages.ts).
  /** `Payload validation error: '<reason>'[ on property <path>[ (<description>)]].` */
  payload: (reason: string, path?: string, description?: string) =>
    new ApiError(400, payloadValidationMessage(reason, path, description), 'invalid_body'),
  /** `Payload validation error: 'Missing required property: <name>'[ on property <path>[: <why>]].` */
  missingProperty: (name: string, path?: string, why?: string) =>
    new ApiError(400, missingPropertyMessage(name, path, why), 'invalid_body'),
  /** A count made after a merge: `...'Too many properties defined (<n>), must be at most <max>' on property <path>.` */
  tooManyProperties: (count: number, max: number, path: string) =>
    new ApiError(400, tooManyPropertiesMessage(count, max, path), 'invalid_body'),
  /** `Query validation error: '<reason>' on property <name>[ (<description>)].` */
  queryParameter: (reason: string, name: string, description?: string) =>
    new ApiError(400, queryValidationMessage(reason, name, description), 'invalid_query_string'),
};

/**
 * Refusals of what Node's HTTP parser could not read, before any route: the request is not HTTP/1.1,
 * its headers are over the limit, or it did not arrive in time.
 */
export const clientError = {
  malformed: (reason: string) => new ApiError(400, `The request is not valid HTTP/1.1: ${reason}.`, 'invalid_request'),
  headersTooLarge: () =>
    new ApiError(431, "The request's headers are larger than the server accepts.", 'invalid_headers'),
  timeout: () => new ApiError(408, 'The request was not received in time.', 'request_timeout'),
};

export const uriTooLong = (maxParamLength: number) =>
  new ApiError(414, `A path parameter is longer than ${maxParamLength} characters.`, 'invalid_uri');

/** An error the framework raised with a status of its own (e.g. 503 while closing), passed through in the API's shape. */
export const frameworkError = (statusCode: number, message: string) => new ApiError(statusCode, message);

/** A self-managed custom domain reached without (or with a wrong) cname-api-key from its proxy. */
export const cnameApiKeyRefused = (message: string) => new ApiError(403, message, 'invalid_cname_api_key');

/** 401s carry the message again under `attributes.error`, as the original's JWT validation does. */
export function unauthorized(message: string): ApiError {
  return new ApiError(401, message, undefined, { error: message }, { 'www-authenticate': 'Bearer' });
}

export const forbidden = {
  scope: (anyOf: readonly string[]) =>
    new ApiError(403, `Insufficient scope, expected any of: ${anyOf.join(',')}`, 'insufficient_scope'),
};

export const notFound = {
  route: () => new ApiError(404, 'Not Found'),
  tenant: (host: string | undefined) =>
    new ApiError(404, `No tenant is served on host ${shownHost(host)}`, 'inexistent_tenant'),
  user: () => new ApiError(404, 'The user does not exist.', 'inexistent_user'),
  snapshot: (name: string) => new ApiError(404, `No snapshot named ${name}`, 'inexistent_snapshot'),
};

/** A Host header as a message repeats it: at most a hostname's 253 characters and a port, never 16 KB of header. */
function shownHost(host: string | undefined): string {
  if (host === undefined) return '(none)';
  return host.length > 260 ? `${host.slice(0, 260)}…` : host;
}

export function conflict(message: string, errorCode?: ErrorCode): ApiError {
  return new ApiError(409, message, errorCode);
}

export function payloadTooLarge(limitBytes: number): ApiError {
  return new ApiError(413, `Payload content length greater than maximum allowed: ${limitBytes}`, 'payload_too_large');
}

export function unsupportedMediaType(contentType: string | undefined): ApiError {
  return new ApiError(415, `Unsupported Media Type: ${contentType ?? '(none)'}`, 'unsupported_media_type');
}

export function tooManyRequests(message = 'Global limit has been reached'): ApiError {
  return new ApiError(429, message, 'too_many_requests');
}

/** A condition that passes (see src/db/unavailable.ts): the SDK, like any HTTP client, retries a 503 after Retry-After. */
export function serviceUnavailable({
  message,
  errorCode,
  retryAfterSeconds,
}: Omit<DatabaseUnavailable, 'code'>): ApiError {
  return new ApiError(503, message, errorCode, undefined, { 'retry-after': String(retryAfterSeconds) });
}

// ---- Custom domains (src/modules/custom-domains) ----

/** The custom domains API's refusals, in the original's words. */
export const customDomainError = {
  notFound: (id: string) => new ApiError(404, `The custom domain ${id} does not exist`, 'inexistent_custom_domain'),
  alreadyExists: () => conflict('Custom domain already exists.'),
  tooMany: () => conflict('You reached the maximum number of custom domains for your account.'),
  mustBeVerified: () => badRequest.body('The domain must be verified before it can be set as default.'),
  alreadyVerified: () => badRequest.body('Custom domain already verified.'),
  notReady: () => conflict('The custom domain is not ready.'),
  deletingDefault: () =>
    conflict('Cannot delete the default custom domain. Please set another domain as default before deleting this one.'),
  relyingPartyIdentifier: () =>
    badRequest.body("The 'relying_party_identifier' must be equal to or a registrable domain suffix of the domain."),
  tlsPolicyOnSelfManaged: () => badRequest.body("The 'tls_policy' cannot be set on self_managed domains"),
  clientIpHeaderOnSvcManaged: () =>
    badRequest.body("The 'custom_client_ip_header' cannot be set on svc_managed domains"),
  unsupportedQuery: () =>
    badRequest.queryParameter('Invalid query: only domain:<value> and domain:<prefix>* are supported', 'q'),
};

// ---- Access tokens (src/modules/oauth) ----

/** Why a bearer token is refused (401), in the words of the original's JWT validation. */
export const tokenRefused = {
  invalid: () => unauthorized('Invalid token'),
  badSignature: () => unauthorized('Invalid signature received for JSON Web Token validation.'),
  expired: () => unauthorized('Expired token received for JSON Web Token validation'),
  notYetValid: () => unauthorized('Token not yet valid (nbf) received for JSON Web Token validation'),
  badIssuer: (issuer: unknown) => unauthorized(`Bad issuer: ${String(issuer)}`),
  badAudience: (audiences: readonly unknown[]) => unauthorized(`Bad audience: ${audiences.join(' ')}`),
};

// ---- Connections (src/modules/connections) ----
const INEXISTENT_CONNECTION = 'The connection does not exist.';
export const connectionErrors = {
  notFound: () => new ApiError(404, INEXISTENT_CONNECTION, 'inexistent_connection'),
};

// ---- Users (src/modules/users) ----
export const userErrors = {
  inexistentConnection: () => new ApiError(400, INEXISTENT_CONNECTION, 'inexistent_connection'),
  unsupportedStrategy: (strategy: string) =>
    new ApiError(400, `Connection strategy '${strategy}' does not support creating users.`, 'operation_not_supported'),
  weakPassword: () => new ApiError(400, 'PasswordStrengthError: Password is too weak', 'invalid_body'),
  exists: () => conflict('The user already exists.', 'svc_idp_error'),
  emailTaken: () => new ApiError(400, 'The specified new email already exists', 'svc_idp_error'),
};

// ---- Segments (src/modules/segments) ----
export const segmentErrors = {
  notFound: () => new ApiError(404, 'Segment not found.', 'inexistent_segment'),
  nameTaken: () => conflict('A segment with this name already exists.', 'segment_name_conflict'),
  /** Segments the service provides ('svc') are read-only, as the original's are. */
  readOnly: () => new ApiError(403, 'Segment cannot be modified.'),
  tooManyPatterns: (count: number, max: number) =>
    badRequest.body(
      payloadValidationMessage(
        `Too many patterns (${count}): at most ${max} in all of a segment's contains, starts_with and ends_with`,
        'rules',
      ),
    ),
};

// ---- Email templates (src/modules/email-templates) ----
export const emailTemplateErrors = {
  exists: (name: string) => conflict(`Template ${name} already exists.`),
  invalidLiquid: (part: string, reason: string) => badRequest.body(`Invalid Liquid template in ${part}: ${reason}`),
  invalidFrom: (from: string | undefined) =>
    badRequest.body(`Invalid from: "${from}" is not an email address (e.g. "Acme <no-reply@acme.example>").`),
  /** A saved template that fails for one user's data; its message is also the reason a failed email is recorded with. */
  notRendered: (reason: string) =>
    new ApiError(400, `The verify_email template could not be rendered: ${reason}`, 'template_render_error'),
};

// ---- Emails (src/modules/emails): the outbox and the development mailbox ----
export const emailErrors = {
  /** No email of the calling tenant has this id (another tenant's is no different). */
  notFound: () => new ApiError(404, 'The email does not exist.', 'inexistent_email'),
  /** The tenant's email, not (or no longer) in the development mailbox: pending, failed, or its files removed. */
  notInMailbox: () =>
    new ApiError(
      404,
      'The email is not in the development mailbox: it has not been sent (yet), or its files were removed.',
      'inexistent_email',
    ),
  /** With SMTP_URL set, a sent email's body is dropped: the server keeps no copy of it. */
  noMailbox: () =>
    new ApiError(
      404,
      'Email bodies are kept only in the development mailbox, and this server sends through SMTP (SMTP_URL is set): it keeps no copy of a sent email.',
      'inexistent_email',
    ),
};

// ---- Email verification (src/modules/email-verification): the domain context, tickets and jobs ----
export const emailVerificationErrors = {
  noEmailAddress: () => new ApiError(400, 'The user does not have an email address.', 'invalid_body'),
  conflictingDomainHeaders: () =>
    new ApiError(
      400,
      'The svc-custom-domain and auth0-custom-domain headers name different domains.',
      'invalid_headers',
    ),
  unknownCustomDomain: () =>
    new ApiError(400, 'The custom domain does not exist for the tenant.', 'inexistent_custom_domain'),
  ambiguousCustomDomain: () => conflict('The tenant has multiple verified custom domains.', 'custom_domain_conflict'),
  inexistentJob: () => new ApiError(404, 'The job does not exist.', 'inexistent_job'),
  templateDisabled: () => new ApiError(400, 'The verify_email template is disabled.', 'operation_not_supported'),
};

/** The same refusal, with the connection closed after it: the rest of a large body is not read for nothing. */
export function closingConnection(error: ApiError): ApiError {
  return new ApiError(error.statusCode, error.message, error.errorCode, error.attributes, {
    ...error.headers,
    connection: 'close',
  });
}

// ---- Users-import jobs (src/modules/users-imports) ----

export const usersImportErrors = {
  notMultipart: () =>
    new ApiError(
      400,
      'The request must be multipart/form-data with the users file in the "users" part.',
      'invalid_body',
    ),
  missingFile: () => badRequest.missingProperty('users'),
  /** A part the operation does not take, or a second file. */
  unexpectedPart: (name: string) => badRequest.payload(`Additional properties not allowed: ${name}`),
  malformedMultipart: (reason: string) =>
    new ApiError(400, `The multipart body could not be read: ${reason}`, 'invalid_body'),
  /** The file is not a JSON array of users, nor NDJSON: refused whole, nothing imported. */
  invalidFile: (reason: string) => new ApiError(400, `Invalid users file: ${reason}.`, 'invalid_body'),
  inexistentConnection: () => new ApiError(400, 'The connection does not exist.', 'inexistent_connection'),
  tooManyPending: (max: number) =>
    tooManyRequests(`There are already ${max} pending users-import jobs for this tenant; wait for one to end.`),
  notDatabaseConnection: (strategy: string) =>
    new ApiError(
      400,
      `Users can only be imported into a database connection; this one's strategy is ${strategy}.`,
      'operation_not_supported',
    ),
};

// ---- Event streams (src/modules/event-streams) ----

/** The original answers both a stream name in use and one stream too many with this one message. */
const STREAM_CONFLICT =
  'You have reached the maximum number of event streams for your account OR Event stream name already in use.';

export const eventStreamErrors = {
  streamNotFound: () => new ApiError(404, 'The requested stream does not exist.'),
  eventNotFound: () => new ApiError(404, 'The event does not exist.'),
  /** The original's 409 for a name the tenant's streams already use, and for one stream too many (EVENT_STREAMS_MAX). */
  nameTaken: () => conflict(STREAM_CONFLICT),
  tooMany: () => conflict(STREAM_CONFLICT),
  notRedeliverable: () => conflict('The event is not in a state that allows redelivery.'),
  /** The original's 409 for POST …/redeliver: here, the stream has REDELIVERIES_UNDER_WAY_MAX redeliveries under way. */
  redeliveriesUnderWay: () => conflict('One or more events is not in a state that allows redelivery.'),
  signingSecretNotFound: () => new ApiError(404, 'The signing secret does not exist.'),
  /** The original also has eventbridge and action destinations; this server delivers to webhooks only. */
  destinationNotSupported: (type: string) =>
    new ApiError(
      400,
      `Destination type '${type}' is not supported by this server; use 'webhook'.`,
      'operation_not_supported',
    ),
  testToDisabledStream: () => conflict('Test events are not delivered to disabled event streams.'),
};
