import { Ajv, type Format, type Options, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { withoutNul } from './nul.ts';

// ajv-formats is CommonJS with `exports.default`; under NodeNext the default import is the whole module.
const addFormats = addFormatsModule.default;

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

/** Validators handed out and not compiled yet (see compileCached). */
const uncompiled = new Set<() => ValidateFunction>();

/**
 * A validator for the schema, compiled on its first use: compiling every route's schemas was most of
 * an app's build time (a quarter of a second), paid on every start for routes a process may never
 * serve. compilePending() compiles what is left, for the test that every schema compiles.
 */
function compileCached(ajv: Ajv, cache: WeakMap<object, ValidateFunction>, schema: object): ValidateFunction {
  let validate = cache.get(schema);
  if (validate === undefined) {
    let compiled: ValidateFunction | undefined;
    const compile = () => {
      if (compiled === undefined) {
        compiled = ajv.compile(schema);
        uncompiled.delete(compile);
      }
      return compiled;
    };
    uncompiled.add(compile);
    const check = function (this: unknown, data: unknown, context?: unknown): boolean {
      const target = compile();
      const valid = (target as (this: unknown, data: unknown, context?: unknown) => boolean).call(this, data, context);
      check.errors = target.errors;
      return valid;
    } as ValidateFunction;
    validate = Object.assign(check, { schema });
    cache.set(schema, validate);
  }
  return validate;
}

/** Compiles every validator handed out so far; throws what Ajv throws for a schema it cannot compile. */
export function compilePending(): number {
  const pending = [...uncompiled];
  for (const compile of pending) compile();
  return pending.length;
}

/**
 * For `fastify.setValidatorCompiler`. The Ajv function itself is returned: fastify calls it with
 * `{ parentData: request, parentDataProperty }` (so root-level coercion sticks), and on `false`
 * reads `.errors` into `error.validation` with `error.validationContext` set to the part's name.
 */
export function validatorCompiler({ schema, httpPart }: { schema: unknown; httpPart?: string }): ValidateFunction {
  if (typeof schema !== 'object' || schema === null) {
    throw new TypeError(`Route schema for ${httpPart ?? 'body'} must be an object`);
  }
  return withoutNul(
    httpPart === undefined || httpPart === 'body'
      ? compileCached(bodyAjv, bodyCache, schema)
      : compileCached(stringlyAjv, stringlyCache, schema),
  );
}

/**
 * The coercing validator form bodies are reshaped with (see form-body.ts): it converts in place,
 * and whether it passes does not matter.
 */
export function formCoercer(schema: object): ValidateFunction {
  return compileCached(formAjv, formCache, schema);
}
