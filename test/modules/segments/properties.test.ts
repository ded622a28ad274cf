import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { CRITERIA_KEYS, MAX_RULES } from '../../../src/modules/segments/schema.ts';
import { databaseKinds } from '../../helpers/databases.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

const BASE = '/api/v2/experimentation/segments';
const TEXT = /^(?!.*\x00)\S(.*\S)?$/u;
const codePoints = (s: string) => [...s].length;

const text = (min: number, max: number) =>
  fc
    .string({ unit: 'grapheme', minLength: min, maxLength: Math.min(max, 40) })
    .filter((s) => TEXT.test(s) && codePoints(s) >= min && codePoints(s) <= max);

// Any code point (NUL, line breaks, astral) in rule strings: they are stored as JSON and must come back unchanged.
const strings = fc.array(fc.string({ unit: 'binary', maxLength: 12 }), { minLength: 1, maxLength: 3 });
const expression = fc.oneof(
  strings,
  strings.map((contains) => ({ contains })),
  strings.map((starts_with) => ({ starts_with })),
  strings.map((ends_with) => ({ ends_with })),
  fc.boolean().map((exists) => ({ exists })),
);
const conditions = fc
  .uniqueArray(fc.constantFrom(...CRITERIA_KEYS), { minLength: 1, maxLength: 10 })
  .chain((keys) =>
    fc.tuple(...keys.map(() => expression)).map((values) => Object.fromEntries(keys.map((k, i) => [k, values[i]]))),
  );
const rule = fc
  .record({ match: conditions, not_match: conditions }, { requiredKeys: [], noNullPrototype: true })
  .filter((r) => Object.keys(r).length > 0);
const segment = fc.record(
  { name: text(3, 255), description: text(3, 1024), rules: fc.array(rule, { minLength: 1, maxLength: 4 }) },
  { requiredKeys: ['name', 'rules'], noNullPrototype: true },
);

type Body = Record<string, unknown> & { rules: Array<Record<string, Record<string, unknown>>> };

/** One way to break a valid body, and the property the refusal must name. */
const breakages: Array<[string, (body: Body) => void, string]> = [
  [
    'name too short',
    (b) => {
      b.name = 'ab';
    },
    'on property name',
  ],
  [
    'name too long',
    (b) => {
      b.name = 'n'.repeat(256);
    },
    'on property name',
  ],
  [
    'name with leading space',
    (b) => {
      b.name = ` ${String(b.name)}`;
    },
    'on property name',
  ],
  [
    'name with trailing newline',
    (b) => {
      b.name = `${String(b.name)}\n`;
    },
    'on property name',
  ],
  [
    'name with NUL',
    (b) => {
      b.name = 'a\u0000bc';
    },
    'on property name',
  ],
  [
    'name not a string',
    (b) => {
      b.name = 42;
    },
    'on property name',
  ],
  [
    'no name',
    (b) => {
      delete b.name;
    },
    'Missing required property: name',
  ],
  [
    'description too short',
    (b) => {
      b.description = 'ab';
    },
    'on property description',
  ],
  [
    'description null on create',
    (b) => {
      b.description = null;
    },
    'on property description',
  ],
  [
    'no rules',
    (b) => {
      delete (b as Partial<Body>).rules;
    },
    'Missing required property: rules',
  ],
  [
    'empty rules',
    (b) => {
      b.rules = [];
    },
    'on property rules',
  ],
  [
    'too many rules',
    (b) => {
      b.rules = Array.from({ length: MAX_RULES + 1 }, () => b.rules[0]!);
    },
    'on property rules',
  ],
  [
    'unknown top-level key',
    (b) => {
      b.type = 'self';
    },
    'Additional properties not allowed: type',
  ],
  [
    'empty rule',
    (b) => {
      b.rules[0] = {};
    },
    'on property rules[0]',
  ],
  [
    'unknown rule member',
    (b) => {
      b.rules[0]!.also = { country: ['US'] };
    },
    'on property rules[0]',
  ],
  [
    'empty match',
    (b) => {
      b.rules[0]!.match = {};
    },
    'on property rules[0].match',
  ],
  [
    'unknown criterion',
    (b) => {
      b.rules[0]!.match = { city: ['Paris'] };
    },
    'on property rules[0].match',
  ],
  [
    'eleven criteria',
    (b) => {
      b.rules[0]!.not_match = Object.fromEntries(CRITERIA_KEYS.map((k) => [k, ['x']]));
    },
    'on property rules[0].not_match',
  ],
  [
    'empty value list',
    (b) => {
      b.rules[0]!.match = { country: [] };
    },
    'on property rules[0].match.country',
  ],
  [
    'value too long',
    (b) => {
      b.rules[0]!.match = { country: ['x'.repeat(1025)] };
    },
    'on property rules[0].match.country',
  ],
  [
    'number in value list',
    (b) => {
      b.rules[0]!.match = { country: ['US', 1] };
    },
    'on property rules[0].match.country',
  ],
  [
    'two operators',
    (b) => {
      b.rules[0]!.match = { domain: { contains: ['a'], ends_with: ['b'] } };
    },
    'on property rules[0].match.domain',
  ],
  [
    'empty operator list',
    (b) => {
      b.rules[0]!.match = { domain: { starts_with: [] } };
    },
    'on property rules[0].match.domain',
  ],
  [
    'exists not boolean',
    (b) => {
      b.rules[0]!.match = { domain: { exists: 'true' } };
    },
    'on property rules[0].match.domain',
  ],
  [
    'unknown operator',
    (b) => {
      b.rules[0]!.match = { domain: { equals: ['a'] } };
    },
    'on property rules[0].match.domain',
  ],
  [
    'rules not an array',
    (b) => {
      b.rules = { match: { country: ['US'] } } as never;
    },
    'on property rules',
  ],
];

for (const kind of databaseKinds()) {
  describe(`segment bodies, property-based (${kind})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(kind);
    });
    after(() => server.close());

    const count = async () =>
      Number(
        (
          await server.services.database.db
            .selectFrom('segments')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );

    it('valid segments round-trip unchanged through POST and GET', async () => {
      await fc.assert(
        fc.asyncProperty(segment, async (body) => {
          // A failed run leaves its segment behind; without this, shrinking would report a name conflict.
          await server.services.database.db.deleteFrom('segments').execute();
          const created = await server.request({ method: 'POST', url: BASE, payload: body });
          assert.equal(created.statusCode, 201, created.body);
          const { id, created_at, updated_at } = created.json();
          const expected = {
            id,
            name: body.name,
            ...(body.description === undefined ? {} : { description: body.description }),
            type: 'self',
            rules: body.rules,
            created_at,
            updated_at,
          };
          const read = await server.request({ url: `${BASE}/${id}` });
          assert.deepEqual(read.json(), expected);
          assert.deepEqual(Object.keys(read.json()), Object.keys(expected));
          assert.equal(read.body, created.body);
        }),
        { numRuns: 75 },
      );
    });

    it('invalid segments are refused with 400 invalid_body naming the property, and nothing is stored', async () => {
      const before = await count();
      await fc.assert(
        fc.asyncProperty(segment, fc.constantFrom(...breakages), async (valid, [, breakBody, names]) => {
          const body = structuredClone(valid) as Body;
          breakBody(body);
          const response = await server.request({ method: 'POST', url: BASE, payload: body });
          assert.equal(response.statusCode, 400, response.body);
          const error = response.json();
          assert.equal(error.errorCode, 'invalid_body');
          assert.match(error.message, /^Payload validation error: '/);
          assert.ok(error.message.includes(names), `${error.message} should mention ${names}`);
        }),
        { numRuns: 100 },
      );
      assert.equal(await count(), before);
    });
  });
}
