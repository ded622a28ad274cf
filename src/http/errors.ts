import { STATUS_CODES } from 'node:http';

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
    readonly errorCode?: string,
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
  errorCode?: string;
  attributes?: Record<string, unknown>;
}

/** Named factories so that each of the original's messages is spelled in exactly one place. */
export const badRequest = {
  body: (message: string) => new ApiError(400, message, 'invalid_body'),
  query: (message: string) => new ApiError(400, message, 'invalid_query_string'),
  uri: (message: string) => new ApiError(400, message, 'invalid_uri'),
  malformedJson: () => new ApiError(400, 'Invalid request payload JSON format', 'invalid_body'),
  authorizationHeader: () => new ApiError(400, 'Bad HTTP authentication header format', 'invalid_header'),
};

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
  user: () => new ApiError(404, 'The user does not exist.', 'inexistent_user'),
};

export function conflict(message: string, errorCode?: string): ApiError {
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
export function serviceUnavailable(message: string, errorCode: string, retryAfterSeconds: number): ApiError {
  return new ApiError(503, message, errorCode, undefined, { 'retry-after': String(retryAfterSeconds) });
}

// ---------------------------------------------------------------------------------------------
// Event streams

export const eventStreamErrors = {
  streamNotFound: () => new ApiError(404, 'The requested stream does not exist.'),
  eventNotFound: () => new ApiError(404, 'The event does not exist.'),
  /** The original's 409 for a name the tenant's streams already use (its message also names a limit). */
  nameTaken: () =>
    conflict('You have reached the maximum number of event streams for your account OR Event stream name already in use.'),
  notRedeliverable: () => conflict('The event is not in a state that allows redelivery.'),
  signingSecretNotFound: () => new ApiError(404, 'The signing secret does not exist.'),
  /** The original also has eventbridge and action destinations; this server delivers to webhooks only. */
  destinationNotSupported: (type: string) =>
    new ApiError(400, `Destination type '${type}' is not supported by this server; use 'webhook'.`, 'operation_not_supported'),
  testToDisabledStream: () => conflict('Test events are not delivered to disabled event streams.'),
};
