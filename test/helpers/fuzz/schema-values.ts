import fc from 'fast-check';

/**
 * Values for the JSON-schema subset the route schemas use (type, enum, anyOf/oneOf, properties,
 * required, additionalProperties, items, min/max lengths, items, properties and numbers, pattern,
 * format), and mutations of them: the fuzzer mostly sends valid bodies with one member broken, so
 * requests get past validation and into the services.
 */
export type Schema = Record<string, unknown>;

/** A stand-in for an id of a live row, picked when the request is sent (rows come and go as the fuzzer runs). */
export class Ref {
  constructor(
    /** Which pool: 'user', 'segment', 'stream', 'customDomain', 'domainName', 'event', 'job', 'signingSecret', 'ticket'. */
    readonly pool: string,
    /** The first tenant's rows, or the second tenant's (which the first must never reach). */
    readonly tenant: 'own' | 'foreign',
    readonly index: number,
  ) {}

  [fc.toStringMethod](): string {
    return `Ref(${this.pool},${this.tenant},${this.index})`;
  }
}

/** Per-member hints: values that mean something to the server (live ids, resolvable hosts, known addresses). */
export type Hints = Record<string, fc.Arbitrary<unknown>>;

/** A hint's way of leaving an optional member out. */
export const ABSENT = Symbol('absent');

const BASE58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const chars = (alphabet: string, length: number) =>
  fc.string({ unit: fc.constantFrom(...alphabet), minLength: length, maxLength: length });

/** Well-formed ids of each id format, unknown to the server. */
export const FORMAT_IDS: Record<string, fc.Arbitrary<string>> = {
  'event-stream-id': chars(BASE58, 22).map((s) => `est_${s}`),
  'event-id': chars(BASE58, 22).map((s) => `evt_${s}`),
  'signing-secret-id': chars(BASE58, 22).map((s) => `whk_${s}`),
  'segment-id': chars(BASE58, 22).map((s) => `seg_${s}`),
  'custom-domain-id': chars(BASE62, 16).map((s) => `cd_${s}`),
  'job-id': chars(BASE62, 16).map((s) => `job_${s}`),
  'connection-id': chars(BASE62, 16).map((s) => `con_${s}`),
};

/** The pool whose live ids a format names. */
export const FORMAT_POOLS: Record<string, string> = {
  'event-stream-id': 'stream',
  'event-id': 'event',
  'signing-secret-id': 'signingSecret',
  'segment-id': 'segment',
  'custom-domain-id': 'customDomain',
  'job-id': 'job',
  'connection-id': 'connection',
};

export const ref = (pool: string, foreignShare = 1): fc.Arbitrary<Ref> =>
  fc
    .tuple(fc.nat({ max: 9 }), fc.nat())
    .map(([who, index]) => new Ref(pool, who < foreignShare ? 'foreign' : 'own', index));

/**
 * encodeURIComponent that never throws: lone surrogates go out as UTF-8's replacement character, as a
 * client would send them (with the `u` flag a surrogate pair is one code point, so only lone ones match).
 */
export function percentEncode(text: string): string {
  return encodeURIComponent(text.replace(/\p{Surrogate}/gu, '\uFFFD'));
}

const asSchema = (value: unknown): Schema | undefined =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Schema) : undefined;

function withLength(arbitrary: fc.Arbitrary<string>, schema: Schema): fc.Arbitrary<string> {
  const min = typeof schema.minLength === 'number' ? schema.minLength : 0;
  const max = typeof schema.maxLength === 'number' ? schema.maxLength : Infinity;
  return arbitrary.filter((s) => s.length >= min && s.length <= max);
}

function stringValue(schema: Schema): fc.Arbitrary<unknown> {
  const format = typeof schema.format === 'string' ? schema.format : undefined;
  if (format && FORMAT_IDS[format]) {
    const pool = FORMAT_POOLS[format]!;
    return fc.oneof({ weight: 3, arbitrary: ref(pool) }, { weight: 1, arbitrary: FORMAT_IDS[format]! });
  }
  switch (format) {
    case 'email':
      return fc
        .tuple(fc.constantFrom('ana', 'bo', 'Chloé', 'd.e+f'), fc.constantFrom('example.com', 'mail.test'))
        .map(([l, d]) => `${l}@${d}`);
    case 'uri':
      return fc.constantFrom('https://app.example/welcome', 'https://app.example/?a=1#x', 'http://localhost:3000/cb');
    case 'result-url':
      return fc.constantFrom('https://app.example/done', 'https://app.example/?a=1#x', 'http://localhost:3000/cb');
    case 'date-time':
      return fc
        .date({ min: new Date('2020-01-01T00:00:00Z'), max: new Date('2030-01-01T00:00:00Z'), noInvalidDate: true })
        .map((d) => d.toISOString().replace(/\.\d{3}Z$/, 'Z'));
  }
  const min = typeof schema.minLength === 'number' ? schema.minLength : 0;
  const max = Math.max(min, Math.min(typeof schema.maxLength === 'number' ? schema.maxLength : 40, 40));
  if (typeof schema.pattern === 'string') {
    const pattern = new RegExp(schema.pattern, 'u');
    try {
      return withLength(fc.stringMatching(pattern), schema);
    } catch {
      // Patterns fast-check cannot generate from (lookaheads): plain strings that happen to match, or a fixed one.
      const matching = withLength(
        fc.string({ minLength: min, maxLength: max }).filter((s) => pattern.test(s)),
        schema,
      );
      return fc.oneof(
        matching,
        withLength(fc.constant('x'.repeat(Math.max(min, 1))), schema).filter((s) => pattern.test(s)),
      );
    }
  }
  return fc
    .oneof(
      fc.string({ minLength: min, maxLength: max }),
      fc.string({ unit: 'grapheme', minLength: min, maxLength: max }),
    )
    .filter((s) => s.length >= min && s.trim() === s && (min === 0 || s.trim() !== ''));
}

/** A value the schema accepts (or nearly: semantic rules beyond the schema are left to the server). */
export function valueOf(schemaValue: unknown, hints: Hints = {}, name?: string, depth = 0): fc.Arbitrary<unknown> {
  const schema = asSchema(schemaValue) ?? {};
  // A member named like a hinted one but of another kind (a segment rule's `connection` is a oneOf of matchers) keeps its schema.
  if (name !== undefined && hints[name] && !('oneOf' in schema)) return hints[name]!;
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  if ('const' in schema) return fc.constant(schema.const);
  for (const keyword of ['anyOf', 'oneOf'] as const) {
    const branches = schema[keyword];
    if (Array.isArray(branches) && branches.length > 0) {
      return fc.oneof(
        ...branches.map((branch) =>
          valueOf({ ...schema, [keyword]: undefined, ...(branch as Schema) }, hints, name, depth),
        ),
      );
    }
  }
  const type = schema.type;
  if (Array.isArray(type)) {
    return fc.oneof(...type.map((t) => valueOf({ ...schema, type: t }, hints, name, depth)));
  }
  switch (type) {
    case 'string':
      return stringValue(schema);
    case 'integer': {
      const min = typeof schema.minimum === 'number' ? schema.minimum : -1000;
      const max = typeof schema.maximum === 'number' ? schema.maximum : 100000;
      return fc.integer({ min, max });
    }
    case 'number':
      return fc.double({
        min: typeof schema.minimum === 'number' ? schema.minimum : -1e6,
        max: typeof schema.maximum === 'number' ? schema.maximum : 1e6,
        noNaN: true,
      });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array':
      return arrayValue(schema, hints, depth);
    case 'object':
      return objectValue(schema, hints, depth);
  }
  return fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.boolean());
}

function arrayValue(schema: Schema, hints: Hints, depth: number): fc.Arbitrary<unknown[]> {
  const min = typeof schema.minItems === 'number' ? schema.minItems : 0;
  const max = Math.max(min, Math.min(typeof schema.maxItems === 'number' ? schema.maxItems : 3, depth > 3 ? min : 3));
  const items = valueOf(schema.items, hints, undefined, depth + 1);
  return schema.uniqueItems
    ? fc.uniqueArray(items, { minLength: min, maxLength: max, selector: (v) => JSON.stringify(v) })
    : fc.array(items, { minLength: min, maxLength: max });
}

function objectValue(schema: Schema, hints: Hints, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const properties = asSchema(schema.properties) ?? {};
  const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  const members: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [key, sub] of Object.entries(properties)) members[key] = valueOf(sub, hints, key, depth + 1);
  const optional = Object.keys(members).filter((k) => !required.has(k));
  const minProperties = typeof schema.minProperties === 'number' ? schema.minProperties : 0;
  const maxProperties = typeof schema.maxProperties === 'number' ? schema.maxProperties : Infinity;
  const declared = fc
    .record(members, { requiredKeys: [...required] })
    .map((value) => {
      for (const key of Object.keys(value)) if (value[key] === ABSENT) delete value[key];
      // Optional members past maxProperties are dropped, last first.
      for (const key of Object.keys(value).reverse())
        if (Object.keys(value).length > maxProperties && !required.has(key)) delete value[key];
      return value;
    })
    .filter((value) => Object.keys(value).length >= minProperties || optional.length === 0);
  const extra = asSchema(schema.additionalProperties);
  if (!extra && schema.additionalProperties !== true) return declared;
  const extraValue = extra ? valueOf(extra, hints, undefined, depth + 1) : fc.jsonValue({ maxDepth: 2 });
  const maxExtra =
    typeof schema.maxProperties === 'number' ? Math.max(0, schema.maxProperties - Object.keys(properties).length) : 3;
  const extraKey = fc.string({ minLength: 1, maxLength: 12 }).filter((k) => !(k in properties) && k !== '__proto__');
  const extras = fc.dictionary(extraKey, extraValue, { maxKeys: Math.min(3, maxExtra) });
  return fc
    .tuple(declared, extras)
    .map(([d, e]) => {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(e)) out[k] = v;
      for (const [k, v] of Object.entries(d)) out[k] = v;
      return out;
    })
    .filter((value) => typeof schema.maxProperties !== 'number' || Object.keys(value).length <= schema.maxProperties);
}

// ---------------------------------------------------------------------------------------------
// Hostile values

const PROTOTYPE_KEYS = [
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
  'valueOf',
  '__defineGetter__',
];

/** Strings that have broken servers: huge, control characters, lone surrogates, NUL, RTL, overlong-looking escapes, SQL and template syntax. */
export const oddString: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.string({ unit: 'grapheme', maxLength: 30 }),
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    'a\u0000b',
    '\ud800',
    '\udfff x',
    '\u202e\u0645\u0631\u062d\u0628\u0627',
    '😀'.repeat(40),
    'e\u0301\u0301\u0301',
    '%00',
    '%2e%2e%2f',
    '../../etc/passwd',
    "' OR 1=1 --",
    '"; drop table users; --',
    '{{ 7 | times: 7 }}',
    '{% raw %}',
    '{{',
    '{%',
    '${7*7}',
    '<script>alert(1)</script>',
    'null',
    'undefined',
    'NaN',
    '-0',
    '1e309',
    '0x10',
    ' padded ',
    'tab\there',
    'new\nline',
    '\r\n\r\n',
    'https://169.254.169.254/latest/meta-data',
    'http://[::1]/',
    'https://user:pass@example.com/',
    'javascript:alert(1)',
    'data:text/html,x',
    '__proto__',
    'constructor',
    'est_',
    'seg_',
    'cd_',
    'user|1',
    'svc|',
    'auth0|' + 'x'.repeat(300),
  ),
  fc
    .tuple(fc.constantFrom('a', 'é', '😀', '\u0000', '{', '%'), fc.constantFrom(256, 1025, 4097, 70_000, 200_000))
    .map(([c, n]) => c.repeat(n)),
);

const leaf: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double(),
  fc.constantFrom(-0, 2 ** 53 + 1, -(2 ** 63), 1e308, 0.1),
  oddString,
  fc.constant([]),
  fc.constant({}),
);

/** Arrays or objects nested deep (deeper still: the raw bodies; as objects, even printing them would overflow the stack). */
export const deepValue: fc.Arbitrary<unknown> = fc
  .tuple(fc.constantFrom(10, 100, 1000), fc.boolean())
  .map(([depth, arrays]) => {
    let value: unknown = 'bottom';
    for (let i = 0; i < depth; i++) value = arrays ? [value] : { a: value };
    return value;
  });

const shallow: fc.Arbitrary<unknown> = fc.oneof(
  leaf,
  fc.constant({ polluted: true }),
  fc.constant({ prototype: { polluted: true } }),
);

/** Any value, hostile ones well represented. */
export const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: leaf },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: deepValue },
  // Parsed, as the server parses bodies: a `__proto__` member stays an own member.
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom(...PROTOTYPE_KEYS), shallow)
      .map(([key, v]) => JSON.parse(`{"${key}":${JSON.stringify(v)}}`)),
  },
);

/** One change to a value: a member replaced, removed, added (unknown or prototype key), or the whole value replaced. */
export function mutate(value: unknown): fc.Arbitrary<unknown> {
  const paths = allPaths(value);
  return fc
    .tuple(
      fc.constantFrom(...paths),
      fc.nat({ max: 5 }),
      anyValue,
      fc.constantFrom(...PROTOTYPE_KEYS, 'unknown_member', 'x'),
    )
    .map(([path, how, replacement, key]) => {
      const copy = structuredCloneWithRefs(value);
      if (path.length === 0) return how < 3 ? replacement : copy;
      const parent = path.slice(0, -1).reduce<any>((node, k) => node[k], copy);
      const last = path[path.length - 1]!;
      if (how === 0 && !Array.isArray(parent)) delete parent[last];
      else if (how === 1 && typeof parent === 'object' && parent !== null && !Array.isArray(parent)) {
        // JSON.parse would make __proto__ an own key; assignment would set the prototype.
        Object.defineProperty(parent, key, {
          value: replacement,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      } else parent[last] = replacement;
      return copy;
    });
}

type Path = Array<string | number>;

function allPaths(value: unknown, prefix: Path = [], out: Path[] = []): Path[] {
  out.push(prefix);
  if (prefix.length > 8 || value instanceof Ref) return out;
  if (Array.isArray(value)) value.forEach((v, i) => allPaths(v, [...prefix, i], out));
  else if (typeof value === 'object' && value !== null)
    for (const [k, v] of Object.entries(value)) allPaths(v, [...prefix, k], out);
  return out;
}

function structuredCloneWithRefs(value: unknown): unknown {
  if (value instanceof Ref) return value;
  if (Array.isArray(value)) return value.map(structuredCloneWithRefs);
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      Object.defineProperty(out, k, {
        value: structuredCloneWithRefs(v),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  }
  return value;
}
