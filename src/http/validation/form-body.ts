import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import qs from 'qs';
import { formCoercer } from './ajv.ts';
import { isObject, schemaRegExp, type Json } from './json.ts';

/**
 * application/x-www-form-urlencoded bodies: parsed with qs (bounded), then reshaped to the types the
 * route's schema expects, so that the strict JSON body validator can judge them as it judges JSON.
 */

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
  const validate = formCoercer(schema);
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
  return (
    type === 'array' || (Array.isArray(type) && type.includes('array')) || 'items' in schema || 'prefixItems' in schema
  );
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
        if (schemaRegExp(pattern)?.test(key) === true) {
          out.push(sub);
          matched = true;
        }
      }
    }
    if (!matched && isObject(additionalProperties)) out.push(additionalProperties);
  }
  return out;
}
