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

// Users
export const userErrors = {
  inexistentConnection: () => new ApiError(400, 'The connection does not exist.', 'inexistent_connection'),
  unsupportedStrategy: (strategy: string) =>
    new ApiError(400, `Connection strategy '${strategy}' does not support creating users.`, 'operation_not_supported'),
  weakPassword: () => new ApiError(400, 'PasswordStrengthError: Password is too weak', 'invalid_body'),
  exists: () => conflict('The user already exists.', 'svc_idp_error'),
  emailTaken: () => new ApiError(400, 'The specified new email already exists', 'svc_idp_error'),
};

// Segments
export const segmentErrors = {
  notFound: () => new ApiError(404, 'Segment not found.', 'inexistent_segment'),
  nameTaken: () => conflict('A segment with this name already exists.', 'segment_name_conflict'),
  /** Segments the service provides ('svc') are read-only, as the original's are. */
  readOnly: () => new ApiError(403, 'Segment cannot be modified.'),
};

// Email templates
export const emailTemplateErrors = {
  exists: (name: string) => conflict(`Template ${name} already exists.`),
  invalidLiquid: (part: string, reason: string) => badRequest.body(`Invalid Liquid template in ${part}: ${reason}`),
  invalidFrom: (from: string | undefined) =>
    badRequest.body(`Invalid from: "${from}" is not an email address (e.g. "Acme <no-reply@acme.example>").`),
  /** A saved template that fails for one user's data; its message is also the reason a failed email is recorded with. */
  notRendered: (reason: string) =>
    new ApiError(400, `The verify_email template could not be rendered: ${reason}`, 'template_render_error'),
};

// Email verification: the domain context, tickets and verification-email jobs
export const emailVerificationErrors = {
  noEmailAddress: () => new ApiError(400, 'The user does not have an email address.', 'invalid_body'),
  conflictingDomainHeaders: () =>
    new ApiError(400, 'The svc-custom-domain and auth0-custom-domain headers name different domains.', 'invalid_headers'),
  unknownCustomDomain: () => new ApiError(400, 'The custom domain does not exist for the tenant.', 'inexistent_custom_domain'),
  ambiguousCustomDomain: () => conflict('The tenant has multiple verified custom domains.', 'custom_domain_conflict'),
  inexistentJob: () => new ApiError(404, 'The job does not exist.', 'inexistent_job'),
  templateDisabled: () => new ApiError(400, 'The verify_email template is disabled.', 'operation_not_supported'),
};
