import type { ErrorObject } from 'ajv';
import { isObject, schemaRegExp, type Json } from './json.ts';

/**
 * The one formatter of validation messages, in the original's z-schema wording:
 * `<Part> validation error: '<reason>'[ on property <path>[ (<description>)]].`
 * Ajv's errors are rendered here, and so are the messages of checks a service makes after the schema
 * passed (a member required only for some connection, a count made after a merge...): those use the
 * small functions below rather than spelling the sentence again.
 */

/** The request parts fastify validates, as it names them in `error.validationContext`. */
export type ValidationPart = 'body' | 'querystring' | 'params' | 'headers';

const LABELS: Record<ValidationPart, string> = {
  body: 'Payload',
  querystring: 'Query',
  params: 'Path',
  headers: 'Headers',
};

/** The sentence itself; `path` empty (the default) when the failure is about the part as a whole. */
export function validationMessage(part: ValidationPart, reason: string, path = '', description?: string): string {
  let text = `${LABELS[part]} validation error: '${reason}'`;
  if (path !== '') {
    text += ` on property ${path}`;
    if (description !== undefined) text += ` (${description})`;
  }
  return `${text}.`;
}

/** `Payload validation error: '<reason>'[ on property <path>[ (<description>)]].` */
export function payloadValidationMessage(reason: string, path?: string, description?: string): string {
  return validationMessage('body', reason, path, description);
}

/** `Query validation error: '<reason>'[ on property <path>[ (<description>)]].` */
export function queryValidationMessage(reason: string, path?: string, description?: string): string {
  return validationMessage('querystring', reason, path, description);
}

/** The reasons a service also gives after its schema passed, worded as the schema's own failures are. */
export const reasons = {
  missingProperty: (name: string) => `Missing required property: ${name}`,
  pattern: (pattern: string, value: string) => `String does not match pattern ${pattern}: ${value}`,
};

/**
 * A member the request needs although the schema could not require it. `why`, when given, follows the
 * path after a colon: `... on property <path>: <why>.`
 */
export function missingPropertyMessage(name: string, path = '', why?: string): string {
  const where = why === undefined || path === '' ? path : `${path}: ${why}`;
  return payloadValidationMessage(reasons.missingProperty(name), where);
}

/**
 * Too many members counted after a merge (a PATCH adding keys to stored ones), which no schema can
 * see. Worded `must be at most`, unlike the schema's own maxProperties failure (`maximum`), as this
 * server always has.
 */
export function tooManyPropertiesMessage(count: number, max: number, path: string): string {
  return payloadValidationMessage(`Too many properties defined (${count}), must be at most ${max}`, path);
}

/** The message for Ajv's errors of one request part (the failure that ended validation). */
export function renderValidationErrors(errors: readonly ErrorObject[], part: ValidationPart): string {
  const chosen = chooseError(errors);
  if (chosen === undefined) return validationMessage(part, 'Invalid data');
  return validationMessage(part, chosen.message, chosen.path, chosen.description);
}

interface Rendered {
  message: string;
  path: string;
  description: string | undefined;
  keyword: string;
}

/** z-schema's error codes, by Ajv keyword: what the original names a failure in a users-import job's errors. */
const CODES: Record<string, string> = {
  type: 'INVALID_TYPE',
  minLength: 'MIN_LENGTH',
  maxLength: 'MAX_LENGTH',
  pattern: 'PATTERN',
  format: 'INVALID_FORMAT',
  required: 'OBJECT_MISSING_REQUIRED_PROPERTY',
  additionalProperties: 'OBJECT_ADDITIONAL_PROPERTIES',
  unevaluatedProperties: 'OBJECT_ADDITIONAL_PROPERTIES',
  enum: 'ENUM_MISMATCH',
  const: 'ENUM_MISMATCH',
  minItems: 'ARRAY_LENGTH_SHORT',
  maxItems: 'ARRAY_LENGTH_LONG',
  uniqueItems: 'ARRAY_UNIQUE',
  minProperties: 'OBJECT_PROPERTIES_MINIMUM',
  maxProperties: 'OBJECT_PROPERTIES_MAXIMUM',
  oneOf: 'ONE_OF_MISSING',
  anyOf: 'ANY_OF_MISSING',
  not: 'NOT_PASSED',
  minimum: 'MINIMUM',
  maximum: 'MAXIMUM',
};

/**
 * The failure that ended validation as a record's error in the original's z-schema terms: its code,
 * its reason (the sentence's quoted part) and the path of the member.
 */
export function validationFailure(errors: readonly ErrorObject[]): { code: string; message: string; path: string } {
  const chosen = chooseError(errors);
  if (chosen === undefined) return { code: 'INVALID_DATA', message: 'Invalid data', path: '' };
  return { code: CODES[chosen.keyword] ?? 'INVALID_DATA', message: chosen.message, path: chosen.path };
}

function chooseError(errors: readonly ErrorObject[]): Rendered | undefined {
  // With allErrors off, Ajv stops at the first failure outside a oneOf/anyOf, and a combinator's
  // error is pushed after its branches' errors, so the last error is the one that ended validation.
  if (errors.length === 0) return undefined;
  return resolve(errors, errors.length - 1);
}

function resolve(errors: readonly ErrorObject[], index: number): Rendered {
  const error = errors[index]!;
  const own = render(error);
  switch (error.keyword) {
    case 'anyOf':
    case 'oneOf': {
      if (error.keyword === 'oneOf' && error.params.passingSchemas != null) return own;
      const branchCount = Array.isArray(error.schema) ? error.schema.length : 0;
      const causes: Rendered[] = [];
      for (let branch = 0; branch < branchCount; branch++) {
        const cause = lastIndexWithPrefix(errors, index, `${error.schemaPath}/${branch}/`);
        // A branch whose errors cannot be attributed (e.g. it went through a compiled $ref) means we
        // cannot claim a common cause.
        if (cause < 0) return own;
        causes.push(resolve(errors, cause));
      }
      // Only when every branch failed for the very same reason is that reason more useful than
      // "does not match any schemas"; e.g. a union of literals all failing with the same enum message.
      const first = causes[0];
      if (first !== undefined && causes.every((c) => c.message === first.message && c.path === first.path)) {
        return { ...first, description: first.description ?? (first.path === own.path ? own.description : undefined) };
      }
      return own;
    }
    case 'if': {
      // The useful error is the one from the `then`/`else` schema that was applied.
      const failing = String(error.params.failingKeyword ?? 'then');
      const prefix = `${error.schemaPath.replace(/\/if$/, '')}/${failing}/`;
      const cause = lastIndexWithPrefix(errors, index, prefix);
      return cause < 0 ? own : resolve(errors, cause);
    }
    default:
      return own;
  }
}

function lastIndexWithPrefix(errors: readonly ErrorObject[], before: number, prefix: string): number {
  for (let i = before - 1; i >= 0; i--) {
    if (errors[i]!.schemaPath.startsWith(prefix)) return i;
  }
  return -1;
}

function render(error: ErrorObject): Rendered {
  const parentSchema = error.parentSchema as Json | undefined;
  const description = typeof parentSchema?.description === 'string' ? parentSchema.description : undefined;
  return { message: messageFor(error), path: renderPath(error.instancePath), description, keyword: error.keyword };
}

/** JSON pointer `/rules/0/match/country` → `rules[0].match.country`. */
export function renderPath(instancePath: string): string {
  if (instancePath === '') return '';
  let out = '';
  for (const raw of instancePath.slice(1).split('/')) {
    const segment = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    // The data is not at hand to tell an array index from a numeric object key; indexes are the norm.
    if (/^(?:0|[1-9]\d*)$/.test(segment)) out += `[${segment}]`;
    else out += out === '' ? segment : `.${segment}`;
  }
  return out;
}

/** z-schema's type names: integers are told apart from other numbers. */
function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') {
    if (Number.isFinite(value)) return Number.isInteger(value) ? 'integer' : 'number';
    return Number.isNaN(value) ? 'not-a-number' : 'unknown-number';
  }
  return typeof value;
}

/** z-schema interpolates objects and null as JSON and everything else (arrays too) with String(). */
function param(value: unknown): string {
  if (value === null || (typeof value === 'object' && !Array.isArray(value))) return JSON.stringify(value);
  return String(value);
}

function messageFor(error: ErrorObject): string {
  const p = error.params as Record<string, unknown>;
  const data = error.data;
  const schema = error.schema;
  const parentSchema = (error.parentSchema ?? {}) as Json;
  switch (error.keyword) {
    case 'type':
      return `Expected type ${param(p.type)} but found type ${typeName(data)}`;
    case 'minLength':
      return `String is too short (${typeof data === 'string' ? data.length : '?'} chars), minimum ${param(p.limit)}`;
    case 'maxLength':
      return `String is too long (${typeof data === 'string' ? data.length : '?'} chars), maximum ${param(p.limit)}`;
    case 'pattern':
      return reasons.pattern(param(p.pattern), param(data));
    case 'format':
      return `Object didn't pass validation for format ${param(p.format)}: ${param(data)}`;
    case 'required':
      return reasons.missingProperty(missingProperty(parentSchema, data, p.missingProperty));
    case 'additionalProperties':
      return `Additional properties not allowed: ${additionalProperties(parentSchema, data, p.additionalProperty)}`;
    case 'unevaluatedProperties':
      return `Additional properties not allowed: ${param(p.unevaluatedProperty)}`;
    case 'enum':
    case 'const':
      return `No enum match for: ${param(data)}`;
    case 'minItems':
      return `Array is too short (${Array.isArray(data) ? data.length : '?'}), minimum ${param(p.limit)}`;
    case 'maxItems':
      return `Array is too long (${Array.isArray(data) ? data.length : '?'}), maximum ${param(p.limit)}`;
    case 'uniqueItems': {
      const [i, j] = firstDuplicatePair(data) ?? [
        Math.min(Number(p.i), Number(p.j)),
        Math.max(Number(p.i), Number(p.j)),
      ];
      return `Array items are not unique (indexes ${i} and ${j})`;
    }
    case 'additionalItems':
    case 'unevaluatedItems':
      return 'Additional items not allowed';
    case 'items':
      // Draft 2020 `items: false` after prefixItems.
      if (schema === false) return 'Additional items not allowed';
      break;
    case 'minProperties':
      return `Too few properties defined (${propertyCount(data)}), minimum ${param(p.limit)}`;
    case 'maxProperties':
      return `Too many properties defined (${propertyCount(data)}), maximum ${param(p.limit)}`;
    case 'oneOf':
      return p.passingSchemas != null
        ? "Data is valid against more than one schema from 'oneOf'"
        : "Data does not match any schemas from 'oneOf'";
    case 'anyOf':
      return "Data does not match any schemas from 'anyOf'";
    case 'not':
      return "Data matches schema from 'not'";
    case 'minimum':
      return `Value ${param(data)} is less than minimum ${param(p.limit)}`;
    case 'maximum':
      return `Value ${param(data)} is greater than maximum ${param(p.limit)}`;
    case 'exclusiveMinimum':
      return `Value ${param(data)} is equal or less than exclusive minimum ${param(p.limit)}`;
    case 'exclusiveMaximum':
      return `Value ${param(data)} is equal or greater than exclusive maximum ${param(p.limit)}`;
    case 'multipleOf':
      return `Value ${param(data)} is not a multiple of ${param(p.multipleOf)}`;
    case 'dependencies':
    case 'dependentRequired':
      return `Dependency failed - key must exist: ${param(p.missingProperty)} (due to key: ${param(p.property)})`;
    case 'propertyNames':
      return `Invalid property name: ${param(p.propertyName)}`;
    case 'false schema':
      return 'Data is not allowed';
    case 'nul':
      // Not Ajv's: the NUL check (nul.ts) words its own message.
      return error.message!;
  }
  const text = error.message ?? 'is invalid';
  return `Data ${text}`;
}

/** z-schema checks `required` back to front, so its first report is the last missing name. */
function missingProperty(parentSchema: Json, data: unknown, fallback: unknown): string {
  if (Array.isArray(parentSchema.required) && isObject(data)) {
    const missing = parentSchema.required.filter((name) => typeof name === 'string' && data[name] === undefined);
    const last = missing[missing.length - 1];
    if (typeof last === 'string') return last;
  }
  return param(fallback);
}

/** z-schema lists every extra key in one message, in reverse order (its set difference walks backwards). */
function additionalProperties(parentSchema: Json, data: unknown, fallback: unknown): string {
  if (!isObject(data)) return param(fallback);
  const declared = isObject(parentSchema.properties) ? parentSchema.properties : {};
  const patterns = isObject(parentSchema.patternProperties) ? Object.keys(parentSchema.patternProperties) : [];
  const extras: string[] = [];
  const keys = Object.keys(data);
  for (let i = keys.length - 1; i >= 0; i--) {
    const key = keys[i]!;
    if (Object.hasOwn(declared, key)) continue;
    if (patterns.some((pattern) => schemaRegExp(pattern)?.test(key) === true)) continue;
    extras.push(key);
  }
  return extras.length > 0 ? extras.join(',') : param(fallback);
}

function propertyCount(data: unknown): number | string {
  return isObject(data) ? Object.keys(data).length : '?';
}

/**
 * z-schema reports the lowest index that has a later duplicate, paired with that duplicate's first
 * occurrence; Ajv scans from the end and would name a different pair.
 */
function firstDuplicatePair(data: unknown): [number, number] | undefined {
  if (!Array.isArray(data)) return undefined;
  const firstSeen = new Map<string, number>();
  let best: [number, number] | undefined;
  for (let j = 0; j < data.length; j++) {
    const key = canonical(data[j]);
    const i = firstSeen.get(key);
    if (i === undefined) firstSeen.set(key, j);
    else if (best === undefined || i < best[0]) {
      best = [i, j];
      // Later occurrences of this value are no improvement; make the key unreachable.
      firstSeen.set(key, Number.POSITIVE_INFINITY);
    }
  }
  return best;
}

/** Key-order-insensitive serialisation, the equality Ajv's uniqueItems uses. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (isObject(value)) {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'undefined';
}
