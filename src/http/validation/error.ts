import type { ErrorObject } from 'ajv';
import { ApiError, badRequest } from '../errors.ts';
import { renderValidationErrors, type ValidationPart } from './messages.ts';

/** Each part's 400, with the error code the original gives it. */
const FAILURES: Record<ValidationPart, (message: string) => ApiError> = {
  body: badRequest.body,
  querystring: badRequest.query,
  params: badRequest.uri,
  headers: badRequest.headers,
};

/**
 * The API error for Ajv's errors on one request part (fastify's `validationContext`; anything else is
 * treated as the body), its message rendered by the one formatter (messages.ts).
 */
export function validationError(errors: readonly ErrorObject[], context: string): ApiError {
  const part: ValidationPart = Object.hasOwn(FAILURES, context) ? (context as ValidationPart) : 'body';
  return FAILURES[part](renderValidationErrors(errors, part));
}
