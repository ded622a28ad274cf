import fc from 'fast-check';
import {
  ABSENT,
  anyValue,
  FORMAT_IDS,
  FORMAT_POOLS,
  mutate,
  oddString,
  percentEncode,
  ref,
  Ref,
  valueOf,
  type Hints,
  type Schema,
} from './schema-values.ts';

/** One operation of the OpenAPI document, with the schemas of its parts. */
export interface Operation {
  method: string;
  /** The path template, `{name}` for parameters. */
  path: string;
  params: Array<{ name: string; in: 'path' | 'query' | 'header'; required: boolean; schema: Schema }>;
  body: Schema | undefined;
  /** What its refusals look like: the Management API's error body, OAuth's, or the verification link's HTML page. */
  family: 'management' | 'oauth' | 'link';
}

/** What a generated request is, before live ids are filled in. */
export interface FuzzRequest {
  operation: Operation;
  /** Each path parameter: a live id, or a raw (already percent-encoded where meant to be) segment. */
  pathValues: Record<string, Ref | { raw: string }>;
  query: Array<[string, unknown]> | { raw: string };
  headers: Record<string, string | Ref>;
  auth: 'admin' | 'none' | 'garbage' | 'foreignTenant' | 'noScopes' | 'empty' | 'basic';
  host: 'own' | 'foreign' | 'unknown' | 'customDomain' | 'none';
  contentType: string | undefined;
  body: { kind: 'none' } | { kind: 'json' | 'form'; value: unknown } | { kind: 'raw'; text: string };
  /** The body is the schema's (unmutated), so only semantics can refuse it. */
  validBody: boolean;
}

/** Counterexamples name the operation rather than print its schemas. */
function named(operation: Operation): Operation {
  return Object.assign(operation, { [fc.toStringMethod]: () => `${operation.method} ${operation.path}` });
}

/** The operations of the document, `paths` × methods, and the OAuth token endpoint (hidden from the document). */
export function operationsOf(document: { paths: Record<string, Record<string, any>> }): Operation[] {
  const operations: Operation[] = [];
  for (const [path, methods] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      const params = ((operation.parameters ?? []) as any[]).map((p) => ({
        name: p.name,
        in: p.in,
        required: p.required === true,
        schema: p.schema ?? {},
      }));
      const body = operation.requestBody?.content?.['application/json']?.schema as Schema | undefined;
      const family = path.startsWith('/api/v2/') ? 'management' : 'link';
      operations.push(named({ method: method.toUpperCase(), path, params, body, family }));
    }
  }
  operations.push(
    named({
      method: 'POST',
      path: '/oauth/token',
      params: [],
      family: 'oauth',
      body: {
        type: 'object',
        required: ['grant_type'],
        properties: {
          grant_type: { type: 'string', enum: ['client_credentials', 'password', 'authorization_code', ''] },
          client_id: { type: 'string' },
          client_secret: { type: 'string' },
          audience: { type: 'string' },
          scope: { type: 'string', enum: ['read:users', 'read:users update:users', 'openid', ''] },
        },
      },
    }),
  );
  return operations;
}

/** Values that reach deep: live rows, the hosts the loopback DNS answers, the seeded credentials. */
export function hintsFor(seeds: { adminId: string; adminSecret: string; audience: string }): Hints {
  const rarely = <T>(arbitrary: fc.Arbitrary<T>) =>
    fc.oneof({ weight: 4, arbitrary: fc.constant(ABSENT) }, { weight: 1, arbitrary });
  const word = fc.stringMatching(/^[a-z][a-z0-9-]{0,10}[a-z0-9]$/);
  const secret = fc.string({ minLength: 8, maxLength: 40 }).map((s) => `secret-${s}`);
  const authorization = fc.oneof(
    fc.record({ method: fc.constant('bearer'), token: secret }),
    fc.record({ method: fc.constant('basic'), username: word, password: secret }),
    fc.record({
      method: fc.constant('custom_header'),
      header_key: fc.constantFrom('x-api-key', 'X-Hook-Token'),
      header_value: secret,
    }),
  );
  return {
    user_id: fc.oneof(
      { weight: 6, arbitrary: ref('user') },
      { weight: 1, arbitrary: fc.constantFrom('svc|000000000000000000000000', 'auth0|x', 'nope') },
    ),
    connection: fc.oneof(
      { weight: 6, arbitrary: fc.constant('Username-Password-Authentication') },
      { weight: 1, arbitrary: fc.constant('Other-Connection') },
    ),
    email: fc
      .tuple(fc.constantFrom('ana', 'bo', 'chloe', 'dee'), fc.constantFrom('example.com', 'mail.test'))
      .map(([l, d]) => `${l}@${d}`),
    password: fc.constantFrom(
      'correct horse battery staple 1!',
      'Sh0rt!',
      'pässwörd-long-enough-123',
      'correct horse battery staple 2!',
    ),
    // The loopback DNS server resolves hooks.fuzz.test to a public address; the delivery worker is off,
    // so such a stream is saved but nothing is ever sent.
    webhook_endpoint: fc.oneof(
      {
        weight: 6,
        arbitrary: fc.constantFrom(
          'https://hooks.fuzz.test/events',
          'https://1.1.1.1/hook',
          'https://hooks.fuzz.test:8443/x?y=1',
        ),
      },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          'https://unknown.fuzz.test/x',
          'http://hooks.fuzz.test/plain',
          'https://127.0.0.1/loop',
          'https://[::1]/x',
          'https://10.0.0.1/private',
          'https://169.254.169.254/latest',
          'https://0x7f000001/',
          'https://localhost./',
          'ftp://hooks.fuzz.test/',
          'not a url',
        ),
      },
    ),
    webhook_authorization: authorization,
    destination: fc.oneof(
      {
        weight: 8,
        arbitrary: fc.record({
          type: fc.constant('webhook'),
          configuration: fc.record({
            webhook_endpoint: fc.constant('https://hooks.fuzz.test/events'),
            webhook_authorization: authorization,
          }),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          type: fc.constantFrom('eventbridge', 'action'),
          configuration: fc.constant({ aws_account_id: '123456789012', aws_region: 'us-east-1' }),
        }),
      },
    ),
    domain: fc.oneof(
      ref('domainName'),
      word.map((w) => `${w}.fuzz.test`),
      fc.constantFrom('tenant.test', 'UPPER.Fuzz.Test', 'other.test'),
    ),
    custom_client_ip_header: rarely(fc.constantFrom('true-client-ip', 'x-forwarded-for', '', null)),
    tls_policy: rarely(fc.constant('recommended')),
    relying_party_identifier: rarely(fc.constantFrom('fuzz.test', 'other.test')),
    from: fc.constantFrom(
      'Acme <no-reply@acme.example>',
      'no-reply@{{ custom_domain.domain }}',
      '{{ user.email }}',
      null,
      ABSENT,
    ),
    resultUrl: fc.constantFrom('https://app.example/done', 'http://localhost/x', null),
    result_url: fc.constantFrom('https://app.example/done', 'http://localhost/x', ABSENT),
    client_id: fc.constantFrom(seeds.adminId, 'unknown-client'),
    client_secret: fc.constantFrom(seeds.adminSecret, 'wrong-secret'),
    audience: fc.constantFrom(seeds.audience, 'https://other.test/api/v2/', ''),
    ticket: fc.oneof(ref('ticket'), fc.constantFrom('x', 'A'.repeat(43))),
  };
}

const PATH_POOLS: Record<string, string> = { id: 'user', templateName: 'template' };

function pathValue(operation: Operation, param: Operation['params'][number]): fc.Arbitrary<Ref | { raw: string }> {
  const format = typeof param.schema.format === 'string' ? param.schema.format : undefined;
  const pool = format ? FORMAT_POOLS[format] : PATH_POOLS[param.name];
  const wellFormed = format && FORMAT_IDS[format] ? FORMAT_IDS[format]! : fc.string({ minLength: 1, maxLength: 30 });
  const valid: fc.Arbitrary<Ref | { raw: string }> = Array.isArray(param.schema.enum)
    ? fc.constantFrom(...(param.schema.enum as string[])).map((raw) => ({ raw }))
    : pool && pool !== 'template'
      ? ref(pool, operation.method === 'GET' ? 2 : 1)
      : wellFormed.map((s) => ({ raw: percentEncode(s) }));
  const odd = fc.oneof(
    oddString.map((s) => ({ raw: percentEncode(s.slice(0, 3000)) })),
    fc
      .constantFrom(
        '..',
        '.',
        '%2e%2e',
        '%2E%2E%2F',
        '..%2f..%2fhealth',
        '%2F',
        '%00',
        '%',
        '%zz',
        '%E0%A4%A',
        '%C0%AE',
        '%F0%9F%98%80',
        'x'.repeat(600),
        'cd_' + 'A'.repeat(5000),
        '%20',
        '+',
        'a;b',
        'a?b',
        'default',
        'verify_email',
        'user_invitation',
      )
      .map((raw) => ({ raw })),
    wellFormed.map((s) => ({ raw: percentEncode(s) })),
  );
  return fc.oneof({ weight: 6, arbitrary: valid }, { weight: 2, arbitrary: odd });
}

function queryOf(operation: Operation, hints: Hints): fc.Arbitrary<FuzzRequest['query']> {
  const params = operation.params.filter((p) => p.in === 'query');
  type Entry = [string, unknown];
  type Entries = Entry[];
  const entries = fc
    .tuple(
      ...params.map((p) => {
        const value = valueOf(p.schema, hints, p.name);
        return fc.oneof(
          { weight: p.required ? 8 : 2, arbitrary: value.map((v): Entries => [[p.name, v]]) },
          { weight: p.required ? 1 : 6, arbitrary: fc.constant<Entries>([]) },
          // Repeated keys, odd values, array syntax.
          {
            weight: 1,
            arbitrary: fc
              .array(fc.oneof(value, oddString), { minLength: 2, maxLength: 3 })
              .map((vs) => vs.map((v): Entry => [p.name, v])),
          },
          { weight: 1, arbitrary: fc.oneof(oddString, anyValue).map((v): Entries => [[p.name, v]]) },
          { weight: 1, arbitrary: value.map((v): Entries => [[`${p.name}[]`, v]]) },
        );
      }),
    )
    .map((lists) => lists.flat());
  const names = [
    'unknown',
    '__proto__',
    'constructor[prototype][x]',
    'a[b][c][d][e][f][g][h][i][j][k]',
    'take',
    'per_page',
    'include_totals',
  ];
  const extra = fc.array(fc.tuple(fc.constantFrom(...names), oddString), { maxLength: 2 });
  const raw = fc
    .constantFrom(
      '%',
      '%zz=1',
      'a=%E0%A4%A',
      '&&&=&',
      '=x',
      'x'.repeat(9000) + '=1',
      'take=1&take=2&take=3',
      'from[]=a&from[]=b',
      'q=' + '%25'.repeat(2000),
      'email=a%40b.c&email=d%40e.f',
    )
    .map((text) => ({ raw: text }));
  return fc.oneof(
    { weight: 12, arbitrary: entries },
    { weight: 2, arbitrary: fc.tuple(entries, extra).map(([a, b]) => [...a, ...b]) },
    { weight: 1, arbitrary: raw },
  );
}

const FORM = 'application/x-www-form-urlencoded';

const CONTENT_TYPES = [
  undefined,
  'text/plain',
  'application/json; charset=utf-8',
  'application/json; charset=utf-16',
  'application/json; charset=latin1',
  'application/json; charset="UTF-8"',
  'APPLICATION/JSON',
  'application/json-patch+json',
  'application/vnd.api+json',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=xyz',
  'application/xml',
  '*/*',
  'application/json;',
  ';',
  'application/json, text/plain',
];

function bodyOf(
  operation: Operation,
  hints: Hints,
): fc.Arbitrary<Pick<FuzzRequest, 'body' | 'contentType' | 'validBody'>> {
  const schema = operation.body;
  type Payload = Pick<FuzzRequest, 'body' | 'contentType' | 'validBody'>;
  const json = (value: unknown, validBody: boolean): Payload => ({
    body: { kind: 'json', value },
    contentType: 'application/json',
    validBody,
  });
  const raw = (text: string, contentType: string | undefined): Payload => ({
    body: { kind: 'raw', text },
    contentType,
    validBody: false,
  });
  const none: Payload = { body: { kind: 'none' }, contentType: undefined, validBody: !schema };
  const valid = schema ? valueOf(schema, hints) : fc.constant(undefined);
  const raws = fc.oneof(
    fc.constantFrom(
      '',
      '{',
      '[]',
      'null',
      '"x"',
      '1',
      '{"a":1,}',
      '{"a":1}{"b":2}',
      '\ufeff{}',
      '{"__proto__":{"polluted":true}}',
      '{"constructor":{"prototype":{"polluted":true}}}',
      '--xyz\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--xyz--\r\n',
      'a=1&a=2&b[c]=3',
      '{"a":' + '['.repeat(20000) + ']'.repeat(20000) + '}',
      'x'.repeat(1024 * 1024 + 10),
    ),
    fc.string({ unit: 'binary', maxLength: 200 }),
  );
  return fc.oneof(
    { weight: schema ? 10 : 1, arbitrary: valid.map((value) => (value === undefined ? none : json(value, true))) },
    { weight: schema ? 6 : 1, arbitrary: valid.chain((value) => mutate(value)).map((value) => json(value, false)) },
    { weight: 1, arbitrary: anyValue.map((value) => json(value, false)) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(valid, fc.constantFrom(...CONTENT_TYPES))
        .map(([value, type]) => raw(JSON.stringify(value) ?? '', type)),
    },
    {
      weight: 1,
      arbitrary: valid.map((value): Payload => ({
        body: { kind: 'form', value },
        contentType: FORM,
        validBody: false,
      })),
    },
    { weight: 1, arbitrary: fc.tuple(raws, fc.constantFrom(...CONTENT_TYPES)).map(([text, type]) => raw(text, type)) },
    { weight: 1, arbitrary: fc.constant(none) },
  );
}

function headersOf(operation: Operation): fc.Arbitrary<Record<string, string | Ref>> {
  const declared = operation.params.filter((p) => p.in === 'header');
  const domainHeader = fc.oneof(
    ref('domainName'),
    fc.constantFrom('tenant.test', 'unknown.fuzz.test', 'bad_domain!', 'a'.repeat(300), 'localhost:8080'),
  );
  const declaredValues = fc
    .tuple(...declared.map((p) => fc.option(domainHeader, { freq: 3 }).map((v) => [p.name, v] as const)))
    .map((pairs) => Object.fromEntries(pairs.filter(([, v]) => v !== null)) as Record<string, string | Ref>);
  const extra = fc.dictionary(
    fc.constantFrom(
      'x-request-id',
      'accept',
      'accept-encoding',
      'x-forwarded-for',
      'x-forwarded-host',
      'cname-api-key',
      'content-encoding',
      'transfer-encoding',
      'expect',
      'x-http-method-override',
    ),
    fc.constantFrom(
      '',
      'gzip',
      '*/*',
      'text/html',
      '127.0.0.1',
      'tenant.test',
      'other.test',
      '100-continue',
      'DELETE',
      'chunked',
      'x'.repeat(8000),
      'ü',
    ),
    { maxKeys: 2 },
  );
  return fc.tuple(declaredValues, fc.option(extra, { freq: 4 })).map(([d, e]) => ({ ...(e ?? {}), ...d }));
}

/** Counterexamples are printed with long strings cut, so a failure stays readable. */
function printable(request: FuzzRequest): FuzzRequest {
  const cut = (_key: string, value: unknown) =>
    typeof value === 'string' && value.length > 120 ? `${value.slice(0, 120)}…(${value.length} chars)` : value;
  const text = () =>
    JSON.stringify({ ...request, operation: `${request.operation.method} ${request.operation.path}` }, cut);
  return Object.assign(request, { [fc.toStringMethod]: text });
}

export function requestArbitrary(operations: readonly Operation[], hints: Hints): fc.Arbitrary<FuzzRequest> {
  return fc.constantFrom(...operations).chain((operation) => {
    const pathParams = operation.params.filter((p) => p.in === 'path');
    const pathValues = fc
      .tuple(...pathParams.map((p) => pathValue(operation, p).map((v) => [p.name, v] as const)))
      .map((pairs) => Object.fromEntries(pairs));
    return fc
      .record({
        operation: fc.constant(operation),
        pathValues,
        query: queryOf(operation, hints),
        headers: headersOf(operation),
        // The admin token and the first tenant's host mostly, so requests reach the handlers.
        auth: fc.oneof(
          { weight: 12, arbitrary: fc.constant<FuzzRequest['auth']>('admin') },
          {
            weight: 6,
            arbitrary: fc.constantFrom<FuzzRequest['auth'][]>(
              'none',
              'garbage',
              'foreignTenant',
              'noScopes',
              'empty',
              'basic',
            ),
          },
        ),
        host: fc.oneof(
          { weight: 12, arbitrary: fc.constant<FuzzRequest['host']>('own') },
          {
            weight: 4,
            arbitrary: fc.constantFrom<FuzzRequest['host'][]>('customDomain', 'foreign', 'unknown', 'none'),
          },
        ),
        payload: bodyOf(operation, hints),
      })
      .map(({ payload, ...rest }) => printable({ ...rest, ...payload }));
  });
}
