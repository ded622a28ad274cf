import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { badRequest } from '../../../../src/http/errors.ts';
import { validatorCompiler } from '../../../../src/http/validation/ajv.ts';
import { validationError } from '../../../../src/http/validation/error.ts';
import {
  missingPropertyMessage,
  payloadValidationMessage,
  queryValidationMessage,
  reasons,
  renderPath,
  renderValidationErrors,
  tooManyPropertiesMessage,
  type ValidationPart,
} from '../../../../src/http/validation/messages.ts';

/** The message the route validator would answer for `data` against `schema` on `part`. */
function messageFor(schema: object, data: unknown, part: ValidationPart = 'body'): string {
  const validate = validatorCompiler({ schema, httpPart: part });
  assert.equal(validate(data), false, 'the data should fail the schema');
  return renderValidationErrors(validate.errors ?? [], part);
}

describe('the formatter renders Ajv errors in the original wording', () => {
  it('missing property: the last missing name, as z-schema checks required back to front', () => {
    const schema = {
      type: 'object',
      required: ['email', 'password'],
      properties: { email: { type: 'string' }, password: { type: 'string' } },
    };
    assert.equal(messageFor(schema, {}), "Payload validation error: 'Missing required property: password'.");
    assert.equal(
      messageFor({ type: 'object', properties: { profile: schema } }, { profile: { password: 'x' } }),
      "Payload validation error: 'Missing required property: email' on property profile.",
    );
  });

  it('additional properties: every extra key, in reverse order', () => {
    const schema = { type: 'object', properties: { name: { type: 'string' } }, additionalProperties: false };
    assert.equal(
      messageFor(schema, { name: 'a', is_default: true, domain: 'x' }),
      "Payload validation error: 'Additional properties not allowed: domain,is_default'.",
    );
  });

  it('type: integers told apart from other numbers, with the property description', () => {
    const schema = { type: 'object', properties: { age: { type: 'integer', description: 'Age in years' } } };
    assert.equal(
      messageFor(schema, { age: '18' }),
      "Payload validation error: 'Expected type integer but found type string' on property age (Age in years).",
    );
    assert.equal(
      messageFor({ type: 'object', properties: { name: { type: 'string' } } }, { name: 1.5 }),
      "Payload validation error: 'Expected type string but found type number' on property name.",
    );
  });

  it('enum', () => {
    const schema = { type: 'object', properties: { kind: { type: 'string', enum: ['a', 'b'] } } };
    assert.equal(
      messageFor(schema, { kind: 'c' }),
      "Payload validation error: 'No enum match for: c' on property kind.",
    );
  });

  it('pattern', () => {
    const schema = { type: 'object', properties: { endpoint: { type: 'string', pattern: '^https://.*' } } };
    assert.equal(
      messageFor(schema, { endpoint: 'http://x' }),
      "Payload validation error: 'String does not match pattern ^https://.*: http://x' on property endpoint.",
    );
  });

  it('maxLength, at a nested path with array indexes', () => {
    const schema = {
      type: 'object',
      properties: {
        rules: { type: 'array', items: { type: 'object', properties: { name: { type: 'string', maxLength: 3 } } } },
      },
    };
    assert.equal(
      messageFor(schema, { rules: [{ name: 'ok' }, { name: 'toolong' }] }),
      "Payload validation error: 'String is too long (7 chars), maximum 3' on property rules[1].name.",
    );
  });

  it('names the part: query strings and path parameters', () => {
    const schema = { type: 'object', properties: { per_page: { type: 'integer', maximum: 100 } } };
    assert.equal(
      messageFor(schema, { per_page: '500' }, 'querystring'),
      "Query validation error: 'Value 500 is greater than maximum 100' on property per_page.",
    );
    const id = { type: 'object', properties: { id: { type: 'string', minLength: 3 } } };
    assert.equal(
      messageFor(id, { id: 'x' }, 'params'),
      "Path validation error: 'String is too short (1 chars), minimum 3' on property id.",
    );
  });

  it('a NUL character in a top-level string member', () => {
    const schema = { type: 'object', properties: { name: { type: 'string' } } };
    assert.equal(
      messageFor(schema, { name: 'a\0b' }),
      "Payload validation error: 'String contains the NUL character' on property name.",
    );
  });

  it('no error at all: Invalid data', () => {
    assert.equal(renderValidationErrors([], 'body'), "Payload validation error: 'Invalid data'.");
  });

  it('JSON pointers become dotted paths with indexes', () => {
    assert.equal(renderPath(''), '');
    assert.equal(renderPath('/rules/0/match/country'), 'rules[0].match.country');
    assert.equal(renderPath('/a~1b/c~0d'), 'a/b.c~d');
  });
});

describe('validationError gives each part its error code', () => {
  const schema = { type: 'object', properties: { x: { type: 'integer' } } };
  const errorsOf = (part: ValidationPart) => {
    const validate = validatorCompiler({ schema, httpPart: part });
    validate({ x: 'no' });
    return validate.errors ?? [];
  };
  for (const [part, code] of [
    ['body', 'invalid_body'],
    ['querystring', 'invalid_query_string'],
    ['params', 'invalid_uri'],
    ['headers', 'invalid_headers'],
  ] as const) {
    it(`${part}: ${code}`, () => {
      const error = validationError(errorsOf(part), part);
      assert.equal(error.statusCode, 400);
      assert.equal(error.errorCode, code);
    });
  }
  it('an unknown part is treated as the body', () => {
    const error = validationError(errorsOf('body'), 'toString');
    assert.equal(error.errorCode, 'invalid_body');
    assert.equal(
      error.message,
      "Payload validation error: 'Expected type integer but found type string' on property x.",
    );
  });
});

describe("the messages services give after the schema passed are the formatter's", () => {
  // Each pair: the factory call a service makes, and the exact text clients have always received.
  const cases: Array<[string, ReturnType<typeof badRequest.payload>, string, string]> = [
    [
      'users: email',
      badRequest.missingProperty('email'),
      "Payload validation error: 'Missing required property: email'.",
      'invalid_body',
    ],
    [
      'users: password',
      badRequest.missingProperty('password'),
      "Payload validation error: 'Missing required property: password'.",
      'invalid_body',
    ],
    [
      'event streams: webhook_endpoint',
      badRequest.missingProperty('webhook_endpoint', 'destination.configuration'),
      "Payload validation error: 'Missing required property: webhook_endpoint' " +
        'on property destination.configuration.',
      'invalid_body',
    ],
    [
      'event streams: webhook_authorization',
      badRequest.missingProperty('webhook_authorization', 'destination.configuration'),
      "Payload validation error: 'Missing required property: webhook_authorization' " +
        'on property destination.configuration.',
      'invalid_body',
    ],
    [
      'event streams: a secret member',
      badRequest.missingProperty('token', 'destination.configuration.webhook_authorization'),
      "Payload validation error: 'Missing required property: token' " +
        'on property destination.configuration.webhook_authorization.',
      'invalid_body',
    ],
    [
      'event streams: a stored secret not sent to a new endpoint',
      badRequest.missingProperty(
        'password',
        'destination.configuration.webhook_authorization',
        'the stored password is only sent to the webhook_endpoint it was given for; send it again to change webhook_endpoint',
      ),
      "Payload validation error: 'Missing required property: password' on property " +
        'destination.configuration.webhook_authorization: the stored password is only sent to the webhook_endpoint it ' +
        'was given for; send it again to change webhook_endpoint.',
      'invalid_body',
    ],
    [
      'event streams: reserved header_key',
      badRequest.payload(
        'header_key Host is set by the server itself and cannot carry the secret',
        'destination.configuration.webhook_authorization',
      ),
      "Payload validation error: 'header_key Host is set by the server itself and cannot carry the secret' " +
        'on property destination.configuration.webhook_authorization.',
      'invalid_body',
    ],
    [
      'event streams: endpoint pattern',
      badRequest.payload(
        reasons.pattern('^https://.*', 'ftp://x'),
        'destination.configuration.webhook_endpoint',
        'URL of the webhook',
      ),
      "Payload validation error: 'String does not match pattern ^https://.*: ftp://x' " +
        'on property destination.configuration.webhook_endpoint (URL of the webhook).',
      'invalid_body',
    ],
    [
      'event streams: endpoint refused',
      badRequest.payload(
        'Address 10.0.0.1 is not public',
        'destination.configuration.webhook_endpoint',
        'URL of the webhook',
      ),
      "Payload validation error: 'Address 10.0.0.1 is not public' " +
        'on property destination.configuration.webhook_endpoint (URL of the webhook).',
      'invalid_body',
    ],
    [
      'custom domains: metadata keys after a merge',
      badRequest.tooManyProperties(12, 10, 'domain_metadata'),
      "Payload validation error: 'Too many properties defined (12), must be at most 10' " +
        'on property domain_metadata.',
      'invalid_body',
    ],
    [
      'custom domains: search query',
      badRequest.queryParameter('Invalid query: only domain:<value> and domain:<prefix>* are supported', 'q'),
      "Query validation error: 'Invalid query: only domain:<value> and domain:<prefix>* are supported' " +
        'on property q.',
      'invalid_query_string',
    ],
    [
      'paging cursor',
      badRequest.queryParameter('Invalid cursor', 'from', 'Cursor from which to start selection'),
      "Query validation error: 'Invalid cursor' on property from (Cursor from which to start selection).",
      'invalid_query_string',
    ],
  ];
  for (const [name, error, message, code] of cases) {
    it(name, () => {
      assert.equal(error.message, message);
      assert.equal(error.statusCode, 400);
      assert.equal(error.errorCode, code);
    });
  }

  it('the message functions behind the factories', () => {
    assert.equal(payloadValidationMessage('Bad'), "Payload validation error: 'Bad'.");
    assert.equal(payloadValidationMessage('Bad', 'a.b'), "Payload validation error: 'Bad' on property a.b.");
    // A description only ever follows a path.
    assert.equal(payloadValidationMessage('Bad', '', 'ignored'), "Payload validation error: 'Bad'.");
    assert.equal(queryValidationMessage('Bad', 'q', 'Search'), "Query validation error: 'Bad' on property q (Search).");
    assert.equal(missingPropertyMessage('email'), "Payload validation error: 'Missing required property: email'.");
    assert.equal(
      missingPropertyMessage('email', '', 'why'),
      "Payload validation error: 'Missing required property: email'.",
    );
    assert.equal(
      tooManyPropertiesMessage(11, 10, 'domain_metadata'),
      "Payload validation error: 'Too many properties defined (11), must be at most 10' on property domain_metadata.",
    );
  });

  it('a schema failure and a service check of the same member read the same', () => {
    const schema = { type: 'object', required: ['email'], properties: { email: { type: 'string' } } };
    assert.equal(messageFor(schema, {}), badRequest.missingProperty('email').message);
  });
});
