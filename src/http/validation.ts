import { Ajv, type ErrorObject, type Format, type Options, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import qs from 'qs';
import { ApiError, badRequest } from './errors.ts';

// ajv-formats is CommonJS with `exports.default`; under NodeNext the default import is the whole module.
const addFormats = addFormatsModule.default;

type Json = Record<string, unknown>;

const BASE58 = '[1-9A-HJ-NP-Za-km-z]';

/** Formats the route schemas refer to by name; kept in one table so every Ajv instance agrees. */
const CUSTOM_FORMATS: Record<string, Format> = {
  'event-stream-id': new RegExp(`^est_${BASE58}{22}$`),
  'event-id': new RegExp(`^evt_${BASE58}{22}$`),
  'segment-id': new RegExp(`^seg_${BASE58}+$`),
  'custom-domain-id': /^cd_[0-9A-Za-z]{16}$/,
};

const COMMON_OPTIONS: Options = {
  strict: false,
  // Two routes may share a schema carrying an `$id`; registering it on first compile would make
  // the second compile throw "already exists".
  addUsedSchema: false,
  // The original stops at the first failure; allErrors would also open a CPU DoS on big payloads.
  allErrors: false,
  // The messages need the failing value and schema (lengths, descriptions, the extra keys...).
  verbose: true,
  removeAdditional: false,
};

/** Bodies are JSON: a `"5"` where an integer is expected is a client error, never coerced. */
const bodyAjv = new Ajv({ ...COMMON_OPTIONS, coerceTypes: false, useDefaults: false });

/** Query strings, path parameters and headers only carry strings, so they are coerced to the schema. */
const stringlyAjv = new Ajv({ ...COMMON_OPTIONS, coerceTypes: 'array', useDefaults: true });

/**
 * Only used to reshape form bodies before the strict body validator sees them. allErrors so that
 * one bad member does not stop the coercion of the members after it; its verdict is discarded.
 */
const formAjv = new Ajv({
  strict: false,
  addUsedSchema: false,
  allErrors: true,
  coerceTypes: 'array',
  useDefaults: false,
  removeAdditional: false,
  validateFormats: false,
});

for (const ajv of [bodyAjv, stringlyAjv, formAjv]) {
  addFormats(ajv);
  for (const [name, format] of Object.entries(CUSTOM_FORMATS)) ajv.addFormat(name, format);
}

/** Adds a named format to every validator; must run before the routes using it are compiled. */
export function registerFormat(name: string, format: Format): void {
  for (const ajv of [bodyAjv, stringlyAjv, formAjv]) ajv.addFormat(name, format);
}

const bodyCache = new WeakMap<object, ValidateFunction>();
const stringlyCache = new WeakMap<object, ValidateFunction>();
const formCache = new WeakMap<object, ValidateFunction>();

function compileCached(ajv: Ajv, cache: WeakMap<object, ValidateFunction>, schema: object): ValidateFunction {
  let validate = cache.get(schema);
  if (validate === undefined) {
    validate = ajv.compile(schema);
    cache.set(schema, validate);
  }
  return validate;
}

/**
 * For `fastify.setValidatorCompiler`. The Ajv function itself is returned: fastify calls it with
 * `{ parentData: request, parentDataProperty }` (so root-level coercion sticks), and on `false`
 * reads `.errors` into `error.validation` with `error.validationContext` set to the part's name.
 */
export function validatorCompiler({ schema, httpPart }: { schema: unknown; httpPart?: string }): ValidateFunction {
  if (typeof schema !== 'object' || schema === null) throw new TypeError(`Route schema for ${httpPart ?? 'body'} must be an object`);
  return withoutNul(httpPart === undefined || httpPart === 'body'
    ? compileCached(bodyAjv, bodyCache, schema)
    : compileCached(stringlyAjv, stringlyCache, schema));
}

const withoutNulCache = new WeakMap<ValidateFunction, ValidateFunction>();

/**
 * No path parameter, query or header value, and no top-level string member of a body, may hold NUL
 * (U+0000): those land in text columns, where PostgreSQL refuses the character (a 500 there, stored
 * as given on SQLite). Strings nested deeper are kept inside JSON, where NUL is escaped and fine.
 */
function withoutNul(validate: ValidateFunction): ValidateFunction {
  let wrapped = withoutNulCache.get(validate);
  if (wrapped !== undefined) return wrapped;
  const check = function (this: unknown, data: unknown, context?: unknown): boolean {
    check.errors = null;
    if (!(validate as (this: unknown, data: unknown, context?: unknown) => boolean).call(this, data, context)) {
      check.errors = validate.errors;
      return false;
    }
    const at = nulMember(data);
    if (at === undefined) return true;
    check.errors = [{ keyword: 'nul', instancePath: at, schemaPath: '#', params: {}, message: 'String contains the NUL character' }];
    return false;
  } as ValidateFunction;
  wrapped = Object.assign(check, { schema: validate.schema, schemaEnv: validate.schemaEnv });
  withoutNulCache.set(validate, wrapped);
  return wrapped;
}

/** JSON pointer of the value, or of its first direct string member, holding NUL. */
function nulMember(data: unknown): string | undefined {
  if (typeof data === 'string') return data.includes('\0') ? '' : undefined;
  if (!isObject(data)) return undefined;
  for (const [key, value] of Object.entries(data)) {
    if (typeof value === 'string' && value.includes('\0')) return `/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`;
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Error translation

const CONTEXTS: Record<string, { label: string; make: (message: string) => ApiError }> = {
  body: { label: 'Payload', make: badRequest.body },
  querystring: { label: 'Query', make: badRequest.query },
  params: { label: 'Path', make: badRequest.uri },
  headers: { label: 'Headers', make: (message) => new ApiError(400, message, 'invalid_headers') },
};

/**
 * Renders one of Ajv's errors the way the original's z-schema + formatter did:
 * `<Part> validation error: '<message>'[ on property <path>[ (<description>)]].`
 */
export function validationError(errors: readonly ErrorObject[], context: string): ApiError {
  const ctx = CONTEXTS[context] ?? CONTEXTS.body!;
  const chosen = chooseError(errors);
  if (chosen === undefined) return ctx.make(`${ctx.label} validation error: 'Invalid data'.`);
  const { message, path, description } = chosen;
  let text = `${ctx.label} validation error: '${message}'`;
  if (path !== '') {
    text += ` on property ${path}`;
    if (description !== undefined) text += ` (${description})`;
  }
  return ctx.make(`${text}.`);
}

interface Rendered {
  message: string;
  path: string;
  description: string | undefined;
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
  return { message: messageFor(error), path: renderPath(error.instancePath), description };
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
      return `String does not match pattern ${param(p.pattern)}: ${param(data)}`;
    case 'format':
      return `Object didn't pass validation for format ${param(p.format)}: ${param(data)}`;
    case 'required':
      return `Missing required property: ${missingProperty(parentSchema, data, p.missingProperty)}`;
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
      const [i, j] = firstDuplicatePair(data) ?? [Math.min(Number(p.i), Number(p.j)), Math.max(Number(p.i), Number(p.j))];
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
    if (patterns.some((pattern) => safeRegExp(pattern)?.test(key) === true)) continue;
    extras.push(key);
  }
  return extras.length > 0 ? extras.join(',') : param(fallback);
}

function safeRegExp(pattern: string): RegExp | undefined {
  try {
    return new RegExp(pattern, 'u');
  } catch {
    return undefined;
  }
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

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

// ---------------------------------------------------------------------------------------------
// application/x-www-form-urlencoded bodies

const QS_OPTIONS: qs.IParseOptions = {
  depth: 10,
  arrayLimit: 100,
  parameterLimit: 1000,
  allowPrototypes: false,
  allowDots: false,
};

/** The content-type parser for form bodies: bounded nesting, array sizes and parameter count. */
export function parseFormBody(raw: string): unknown {
  return qs.parse(raw, QS_OPTIONS);
}

/**
 * Forms carry only strings and qs's idea of arrays, so the body is reshaped to what the route's
 * schema expects before the strict (non-coercing) body validator runs. Whatever cannot be coerced
 * is left as is for that validator to report.
 */
export function coerceFormBody(schema: unknown, body: unknown): unknown {
  if (!isObject(schema) || body === null || typeof body !== 'object') return body;
  const copy = arraysFromIndexObjects(structuredClone(body), [schema], schema);
  const validate = compileCached(formAjv, formCache, schema);
  // Ajv can only replace the root value (e.g. wrap it in an array) through its parent.
  const holder: { value: unknown } = { value: copy };
  validate(copy, {
    instancePath: '',
    parentData: holder,
    parentDataProperty: 'value',
    rootData: holder,
    dynamicAnchors: {},
  });
  return holder.value;
}

/**
 * preValidation hook applying coerceFormBody to form-encoded requests; register on the root instance.
 * A callback hook, not an async one: it runs on every request and nearly always does nothing.
 */
export function formBodyPreValidation(request: FastifyRequest, _reply: FastifyReply, done: () => void): void {
  const schema = request.routeOptions.schema?.body;
  if (schema !== undefined && isFormRequest(request)) request.body = coerceFormBody(schema, request.body);
  done();
}

/** Installs the form parser and the coercion hook on `app` (call on the root, before routes). */
export function registerFormBodySupport(app: FastifyInstance): void {
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, raw, done) => {
    try {
      done(null, parseFormBody(raw as string));
    } catch (error) {
      done(error as Error, undefined);
    }
  });
  app.addHook('preValidation', formBodyPreValidation);
}

function isFormRequest(request: FastifyRequest): boolean {
  const type = request.headers['content-type'];
  return typeof type === 'string' && /^\s*application\/x-www-form-urlencoded\s*(?:;|$)/i.test(type);
}

const INDEX_KEY = /^(?:0|[1-9]\d*)$/;

/**
 * qs turns `a[0]=x` into an array only up to its arrayLimit (and not when indexes are sparse or
 * mixed with names); past that it yields `{ '101': 'x' }`. Where the schema wants an array, such
 * all-index objects become arrays (compacted in index order, as qs itself compacts).
 */
function arraysFromIndexObjects(value: unknown, schemas: readonly unknown[], root: Json): unknown {
  const candidates = expandSchemas(schemas, root);
  if (candidates.length === 0) return value;

  let current = value;
  if (isObject(current) && candidates.some(wantsArray)) {
    const keys = Object.keys(current);
    if (keys.length > 0 && keys.every((k) => INDEX_KEY.test(k))) {
      const obj = current;
      current = keys.sort((a, b) => Number(a) - Number(b)).map((k) => obj[k]);
    }
  }

  if (Array.isArray(current)) {
    for (let i = 0; i < current.length; i++) {
      current[i] = arraysFromIndexObjects(current[i], itemSchemas(candidates, i), root);
    }
  } else if (isObject(current)) {
    for (const key of Object.keys(current)) {
      const next = arraysFromIndexObjects(current[key], propertySchemas(candidates, key), root);
      if (next !== current[key]) {
        Object.defineProperty(current, key, { value: next, writable: true, enumerable: true, configurable: true });
      }
    }
  }
  return current;
}

/** The schema plus everything it defers to (local $ref, allOf/anyOf/oneOf, then/else). */
function expandSchemas(schemas: readonly unknown[], root: Json): Json[] {
  const out: Json[] = [];
  const visit = (schema: unknown, depth: number): void => {
    if (!isObject(schema) || depth > 16 || out.includes(schema)) return;
    out.push(schema);
    if (typeof schema.$ref === 'string') visit(resolveLocalRef(root, schema.$ref), depth + 1);
    for (const keyword of ['allOf', 'anyOf', 'oneOf'] as const) {
      const list = schema[keyword];
      if (Array.isArray(list)) for (const sub of list) visit(sub, depth + 1);
    }
    visit(schema.then, depth + 1);
    visit(schema.else, depth + 1);
  };
  for (const schema of schemas) visit(schema, 0);
  return out;
}

function resolveLocalRef(root: Json, ref: string): unknown {
  if (!ref.startsWith('#')) return undefined;
  let node: unknown = root;
  for (const raw of ref.slice(1).split('/').slice(1)) {
    const segment = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (!isObject(node) && !Array.isArray(node)) return undefined;
    node = (node as Json)[segment];
  }
  return node;
}

function wantsArray(schema: Json): boolean {
  const type = schema.type;
  return type === 'array' || (Array.isArray(type) && type.includes('array')) || 'items' in schema || 'prefixItems' in schema;
}

function itemSchemas(schemas: readonly Json[], index: number): unknown[] {
  const out: unknown[] = [];
  for (const schema of schemas) {
    const { items, prefixItems, additionalItems } = schema;
    if (Array.isArray(prefixItems) && index < prefixItems.length) out.push(prefixItems[index]);
    else if (Array.isArray(items)) out.push(index < items.length ? items[index] : additionalItems);
    else if (isObject(items)) out.push(items);
  }
  return out;
}

function propertySchemas(schemas: readonly Json[], key: string): unknown[] {
  const out: unknown[] = [];
  for (const schema of schemas) {
    const { properties, patternProperties, additionalProperties } = schema;
    let matched = false;
    if (isObject(properties) && Object.hasOwn(properties, key)) {
      out.push(properties[key]);
      matched = true;
    }
    if (isObject(patternProperties)) {
      for (const [pattern, sub] of Object.entries(patternProperties)) {
        if (safeRegExp(pattern)?.test(key) === true) {
          out.push(sub);
          matched = true;
        }
      }
    }
    if (!matched && isObject(additionalProperties)) out.push(additionalProperties);
  }
  return out;
}
