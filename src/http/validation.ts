/**
 * Request validation, one concept per file under validation/:
 * - ajv.ts: the validators (JSON bodies strict, query/path/headers coerced) and the named formats;
 * - nul.ts: the NUL character refused where it would reach a text column;
 * - messages.ts: the one formatter of validation messages, in the original's z-schema wording;
 * - error.ts: a failed validation as the API's 400;
 * - form-body.ts: form-encoded bodies, parsed and reshaped to the schema.
 * Callers import from here. Services that check a member after the schema use the catalogue's
 * factories (`badRequest.payload`, `badRequest.missingProperty`... in errors.ts), worded by messages.ts.
 */
export { registerFormat, validatorCompiler } from './validation/ajv.ts';
export { validationError } from './validation/error.ts';
export {
  coerceFormBody,
  formBodyPreValidation,
  parseFormBody,
  registerFormBodySupport,
} from './validation/form-body.ts';
export {
  missingPropertyMessage,
  payloadValidationMessage,
  queryValidationMessage,
  reasons,
  renderPath,
  renderValidationErrors,
  tooManyPropertiesMessage,
  validationFailure,
  validationMessage,
  type ValidationPart,
} from './validation/messages.ts';
