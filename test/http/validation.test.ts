import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import Fastify, { type FastifyError, type FastifyInstance } from 'fastify';
import { Type } from '@sinclair/typebox';
import {
  coerceFormBody,
  parseFormBody,
  registerFormBodySupport,
  renderPath,
  validationError,
  validatorCompiler,
} from '../../src/http/validation.ts';
import { ApiError } from '../../src/http/errors.ts';

const CreateUser = Type.Object(
  {
    email: Type.String({ format: 'email' }),
    name: Type.Optional(Type.String({ maxLength: 5 })),
    age: Type.Optional(Type.Integer({ minimum: 18 })),
    fail_open: Type.Optional(Type.Boolean()),
    kind: Type.Optional(Type.Unsafe<string>({ type: 'string', enum: ['a', 'b'] })),
    profile: Type.Optional(Type.Object({ nickname: Type.String() }, { additionalProperties: false })),
  },
  { additionalProperties: false },
);

const Rules = Type.Object({
  rules: Type.Array(
    Type.Object({
      match: Type.Object({ country: Type.Array(Type.String({ minLength: 2, maxLength: 2 })) }),
    }),
  ),
});

// Raw JSON schema for the combinators: TypeBox's Union always emits anyOf.
const Rule = {
  type: 'object',
  properties: {
    rule: {
      type: 'object',
      properties: {
        match: {
          oneOf: [
            { type: 'object', properties: { ip: { type: 'string' } }, required: ['ip'], additionalProperties: false },
            {
              type: 'object',
              properties: { asn: { type: 'integer' } },
              required: ['asn'],
              additionalProperties: false,
            },
          ],
        },
        auth0_managed: { type: 'array', items: { type: 'string' }, uniqueItems: true },
        mode: Type.Union([Type.Literal('block'), Type.Literal('allow')], { description: 'Action mode' }),
        level: { oneOf: [{ type: 'integer' }, { type: 'number', minimum: 0 }] },
      },
    },
  },
};

const ListQuery = Type.Object({
  take: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, description: 'Page size' })),
  include_totals: Type.Optional(Type.Boolean()),
});

const StreamParams = Type.Object({
  id: Type.String({ format: 'event-stream-id', description: 'Unique identifier for the event stream' }),
});

const FormBody = Type.Object(
  { a: Type.Boolean(), n: Type.Integer(), list: Type.Array(Type.String()) },
  { additionalProperties: false },
);

async function buildApp(): Promise<FastifyInstance> {
  const app = Fastify();
  app.setValidatorCompiler(validatorCompiler);
  registerFormBodySupport(app);
  app.setErrorHandler<FastifyError>((error, _request, reply) => {
    const apiError =
      error.validation !== undefined
        ? validationError(error.validation, error.validationContext ?? 'body')
        : error instanceof ApiError
          ? error
          : new ApiError(500, error.message);
    void reply.status(apiError.statusCode).send(apiError.toBody());
  });
  const echo = async (request: { body?: unknown; query?: unknown; params?: unknown }) => ({
    body: request.body,
    query: request.query,
    params: request.params,
  });
  app.post('/users', { schema: { body: CreateUser } }, echo);
  app.post('/rules', { schema: { body: Rules } }, echo);
  app.post('/rule', { schema: { body: Rule } }, echo);
  app.post('/form', { schema: { body: FormBody } }, echo);
  app.get('/users', { schema: { querystring: ListQuery } }, echo);
  app.get('/event-streams/:id', { schema: { params: StreamParams } }, echo);
  await app.ready();
  return app;
}

let app: FastifyInstance;
before(async () => {
  app = await buildApp();
});
after(async () => {
  await app.close();
});

async function post(url: string, payload: unknown) {
  return app.inject({ method: 'POST', url, payload: payload as object });
}

async function expect400(
  response: { statusCode: number; json: () => unknown },
  message: string,
  errorCode = 'invalid_body',
): Promise<void> {
  assert.equal(response.statusCode, 400);
  assert.deepEqual(response.json(), { statusCode: 400, error: 'Bad Request', message, errorCode });
}

describe('body validation', () => {
  it('reports a missing top-level member without "on property"', async () => {
    await expect400(
      await post('/users', { name: 'x' }),
      "Payload validation error: 'Missing required property: email'.",
    );
  });

  it('names the last missing member first, as z-schema checks `required` back to front', async () => {
    const schema = Type.Object({ connection: Type.String(), email: Type.String() });
    const validate = validatorCompiler({ schema, httpPart: 'body' });
    assert.equal(validate({}), false);
    assert.equal(
      validationError(validate.errors ?? [], 'body').message,
      "Payload validation error: 'Missing required property: email'.",
    );
  });

  it('reports an additional property at the top level', async () => {
    await expect400(
      await post('/users', { email: 'a@example.com', scopes: [] }),
      "Payload validation error: 'Additional properties not allowed: scopes'.",
    );
  });

  it('reports an additional property on the nested object holding it', async () => {
    await expect400(
      await post('/users', { email: 'a@example.com', profile: { nickname: 'n', color: 'red' } }),
      "Payload validation error: 'Additional properties not allowed: color' on property profile.",
    );
  });

  it('lists every additional property in one message, like z-schema', async () => {
    await expect400(
      await post('/users', { email: 'a@example.com', scopes: [], extra: 1 }),
      "Payload validation error: 'Additional properties not allowed: extra,scopes'.",
    );
  });

  it('reports a number where a string is expected as integer', async () => {
    await expect400(
      await post('/users', { email: 'a@example.com', name: 42 }),
      "Payload validation error: 'Expected type string but found type integer' on property name.",
    );
  });

  it('does not coerce JSON bodies: "true" is not a boolean, "20" is not an integer', async () => {
    await expect400(
      await post('/users', { email: 'a@example.com', fail_open: 'true' }),
      "Payload validation error: 'Expected type boolean but found type string' on property fail_open.",
    );
    await expect400(
      await post('/users', { email: 'a@example.com', age: '20' }),
      "Payload validation error: 'Expected type integer but found type string' on property age.",
    );
  });

  it('reports a fraction where an integer is expected as number', async () => {
    await expect400(
      await post('/users', { email: 'a@example.com', age: 20.5 }),
      "Payload validation error: 'Expected type integer but found type number' on property age.",
    );
  });

  it('reports numeric limits', async () => {
    await expect400(
      await post('/users', { email: 'a@example.com', age: 17 }),
      "Payload validation error: 'Value 17 is less than minimum 18' on property age.",
    );
  });

  it('reports a too long string with its length and the maximum', async () => {
    await expect400(
      await post('/users', { email: 'a@example.com', name: 'abcdef' }),
      "Payload validation error: 'String is too long (6 chars), maximum 5' on property name.",
    );
  });

  it('reports format failures with the offending value', async () => {
    await expect400(
      await post('/users', { email: 'not-an-email' }),
      "Payload validation error: 'Object didn't pass validation for format email: not-an-email' on property email.",
    );
  });

  it('renders nested array paths with indexes', async () => {
    await expect400(
      await post('/rules', { rules: [{ match: { country: ['US'] } }, { match: { country: 'FR' } }] }),
      "Payload validation error: 'Expected type array but found type string' on property rules[1].match.country.",
    );
    await expect400(
      await post('/rules', { rules: [{ match: { country: ['US', 'USA'] } }] }),
      "Payload validation error: 'String is too long (3 chars), maximum 2' on property rules[0].match.country[1].",
    );
  });

  it('reports an enum mismatch with the value as z-schema interpolates it', async () => {
    await expect400(
      await post('/users', { email: 'a@example.com', kind: 'c' }),
      "Payload validation error: 'No enum match for: c' on property kind.",
    );
    await expect400(
      await post('/users', { email: 'a@example.com', kind: { x: 1 } }),
      "Payload validation error: 'Expected type string but found type object' on property kind.",
    );
  });

  it('reports a failed oneOf at the member holding it', async () => {
    await expect400(
      await post('/rule', { rule: { match: { ip: '1.2.3.4', asn: 1 } } }),
      "Payload validation error: 'Data does not match any schemas from 'oneOf'' on property rule.match.",
    );
  });

  it('reports a oneOf matched by several branches', async () => {
    await expect400(
      await post('/rule', { rule: { level: 3 } }),
      "Payload validation error: 'Data is valid against more than one schema from 'oneOf'' on property rule.level.",
    );
  });

  it('reports the common cause when every branch of a union fails the same way, with its description', async () => {
    await expect400(
      await post('/rule', { rule: { mode: 'deny' } }),
      "Payload validation error: 'No enum match for: deny' on property rule.mode (Action mode).",
    );
  });

  it('reports duplicate array items with the first pair of indexes', async () => {
    await expect400(
      await post('/rule', { rule: { auth0_managed: ['a', 'a', 'b', 'b'] } }),
      "Payload validation error: 'Array items are not unique (indexes 0 and 1)' on property rule.auth0_managed.",
    );
    await expect400(
      await post('/rule', { rule: { auth0_managed: ['a', 'b', 'b', 'a'] } }),
      "Payload validation error: 'Array items are not unique (indexes 0 and 3)' on property rule.auth0_managed.",
    );
  });

  it('refuses NUL in a top-level string of the body or the query; nested strings (kept as JSON) may hold it', async () => {
    await expect400(
      await post('/users', { email: 'a@example.com', name: 'a\u0000b' }),
      "Payload validation error: 'String contains the NUL character' on property name.",
    );
    assert.equal((await post('/rules', { rules: [{ match: { country: ['FR', 'x\u0000'] } }] })).statusCode, 200);
    await expect400(
      await app.inject({ method: 'GET', url: '/users?from=a%00b' }),
      "Query validation error: 'String contains the NUL character' on property from.",
      'invalid_query_string',
    );
  });

  it('accepts a valid body untouched', async () => {
    const response = await post('/users', { email: 'a@example.com', age: 30, fail_open: false });
    assert.equal(response.statusCode, 200);
    assert.deepEqual(response.json().body, { email: 'a@example.com', age: 30, fail_open: false });
  });
});

describe('querystring validation', () => {
  it('coerces numeric strings', async () => {
    const response = await app.inject({ method: 'GET', url: '/users?take=5&include_totals=true' });
    assert.equal(response.statusCode, 200);
    assert.deepEqual(response.json().query, { take: 5, include_totals: true });
  });

  it('rejects values that cannot be coerced, with invalid_query_string and the description', async () => {
    await expect400(
      await app.inject({ method: 'GET', url: '/users?take=abc' }),
      "Query validation error: 'Expected type integer but found type string' on property take (Page size).",
      'invalid_query_string',
    );
    await expect400(
      await app.inject({ method: 'GET', url: '/users?take=500' }),
      "Query validation error: 'Value 500 is greater than maximum 100' on property take (Page size).",
      'invalid_query_string',
    );
  });
});

describe('path parameter validation', () => {
  it('reports a format failure with the description appended and invalid_uri', async () => {
    await expect400(
      await app.inject({ method: 'GET', url: '/event-streams/est_invalid_id_1234567890' }),
      "Path validation error: 'Object didn't pass validation for format event-stream-id: est_invalid_id_1234567890' on property id (Unique identifier for the event stream).",
      'invalid_uri',
    );
  });

  it('accepts a well-formed id', async () => {
    const id = 'est_2ZCrfLDhqPXu9Tf1GdnKmW';
    const response = await app.inject({ method: 'GET', url: `/event-streams/${id}` });
    assert.equal(response.statusCode, 200);
    assert.deepEqual(response.json().params, { id });
  });
});

describe('form bodies', () => {
  const form = (payload: string, url = '/form') =>
    app.inject({ method: 'POST', url, payload, headers: { 'content-type': 'application/x-www-form-urlencoded' } });

  it('coerces booleans, integers and indexed lists to the schema before strict validation', async () => {
    const response = await form('a=true&n=5&list[0]=x');
    assert.equal(response.statusCode, 200);
    assert.deepEqual(response.json().body, { a: true, n: 5, list: ['x'] });
  });

  it('still reports what cannot be coerced', async () => {
    await expect400(
      await form('a=maybe&n=5&list[0]=x'),
      "Payload validation error: 'Expected type boolean but found type string' on property a.",
    );
    await expect400(await form('a=true&list=x'), "Payload validation error: 'Missing required property: n'.");
  });

  it('builds nested arrays of objects', async () => {
    const response = await form('rules[0][match][country][0]=US', '/rules');
    assert.equal(response.statusCode, 200);
    assert.deepEqual(response.json().body, { rules: [{ match: { country: ['US'] } }] });
  });

  it('coerceFormBody turns index-keyed objects into arrays only where the schema wants an array', () => {
    const schema = Type.Object({
      list: Type.Array(Type.String()),
      map: Type.Record(Type.String(), Type.String()),
    });
    const input = { list: { '150': 'b', '120': 'a' }, map: { '7': 'x' } };
    assert.deepEqual(coerceFormBody(schema, input), { list: ['a', 'b'], map: { '7': 'x' } });
    // The caller's object is left alone.
    assert.deepEqual(input, { list: { '150': 'b', '120': 'a' }, map: { '7': 'x' } });
  });

  it('coerceFormBody wraps a lone value into an array and coerces inside arrays', () => {
    const schema = Type.Object({ ids: Type.Array(Type.Integer()), flag: Type.Boolean() });
    assert.deepEqual(coerceFormBody(schema, parseFormBody('ids=3&flag=false')), { ids: [3], flag: false });
    assert.deepEqual(coerceFormBody(schema, parseFormBody('ids[0]=1&ids[1]=2&flag=true')), { ids: [1, 2], flag: true });
  });

  it('parseFormBody refuses prototype keys and bounds nesting', () => {
    const parsed = parseFormBody('__proto__[polluted]=1&a[b]=c') as Record<string, unknown>;
    assert.deepEqual(parsed, { a: { b: 'c' } });
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    const deep = JSON.stringify(parseFormBody('a[1][2][3][4][5][6][7][8][9][10][11][12]=x'));
    assert.match(deep, /"\[11\]\[12\]":"x"/);
  });
});

describe('helpers', () => {
  it('renders JSON pointers as dotted paths with indexes', () => {
    assert.equal(renderPath(''), '');
    assert.equal(renderPath('/rules/0/match/country'), 'rules[0].match.country');
    assert.equal(renderPath('/0/a~1b/c~0d'), '[0].a/b.c~d');
  });

  it('compiles each schema once per validator kind', () => {
    const schema = Type.Object({ x: Type.String() });
    assert.equal(validatorCompiler({ schema, httpPart: 'body' }), validatorCompiler({ schema, httpPart: 'body' }));
    assert.notEqual(
      validatorCompiler({ schema, httpPart: 'body' }),
      validatorCompiler({ schema, httpPart: 'querystring' }),
    );
  });

  it('maps headers to invalid_headers', () => {
    const validate = validatorCompiler({
      schema: Type.Object({ 'x-id': Type.String() }, { required: ['x-id'] }),
      httpPart: 'headers',
    });
    assert.equal(validate({}), false);
    const error = validationError(validate.errors ?? [], 'headers');
    assert.equal(error.errorCode, 'invalid_headers');
    assert.equal(error.message, "Headers validation error: 'Missing required property: x-id'.");
  });
});
