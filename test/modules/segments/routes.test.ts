import assert from 'node:assert/strict';
import { after, before, describe, it, mock } from 'node:test';
import { databaseKinds } from '../../helpers/databases.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

const BASE = '/api/v2/experimentation/segments';
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const KEY_ORDER = ['id', 'name', 'description', 'type', 'rules', 'created_at', 'updated_at'];

for (const kind of databaseKinds()) {
  describe(`experimentation segments (${kind})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(kind);
    });
    after(() => server.close());

    const create = (payload: unknown, token?: string) =>
      server.request({ method: 'POST', url: BASE, payload: payload as object, token });
    const read = (id: string) => server.request({ url: `${BASE}/${id}` });
    const patch = (id: string, payload: unknown) =>
      server.request({ method: 'PATCH', url: `${BASE}/${id}`, payload: payload as object });
    const count = async () =>
      Number(
        (
          await server.services.database.db
            .selectFrom('segments')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const notFoundBody = {
      statusCode: 404,
      error: 'Not Found',
      message: 'Segment not found.',
      errorCode: 'inexistent_segment',
    };
    const conflictBody = {
      statusCode: 409,
      error: 'Conflict',
      message: 'A segment with this name already exists.',
      errorCode: 'segment_name_conflict',
    };

    it('creates a segment (201) and reads it back, keys in the original order', async () => {
      const rules = [{ match: { domain: { ends_with: ['example.com'] } }, not_match: { country: ['US'] } }];
      const created = await create({ name: 'External non-US', description: 'Everyone abroad', rules });
      assert.equal(created.statusCode, 201, created.body);
      assert.equal(created.headers['content-type'], 'application/json; charset=utf-8');
      const segment = created.json();
      assert.match(segment.id, /^seg_[1-9A-HJ-NP-Za-km-z]{22}$/);
      assert.deepEqual(Object.keys(segment), KEY_ORDER);
      assert.equal(segment.type, 'self');
      assert.deepEqual(segment.rules, rules);
      assert.match(segment.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.equal(segment.created_at, segment.updated_at);
      const got = await read(segment.id);
      assert.equal(got.statusCode, 200);
      assert.equal(got.body, created.body);
    });

    it('omits an absent description', async () => {
      const segment = (
        await create({ name: 'No description', rules: [{ match: { browser: { exists: true } } }] })
      ).json();
      assert.deepEqual(
        Object.keys(segment),
        KEY_ORDER.filter((k) => k !== 'description'),
      );
    });

    it('accepts a nested form-encoded body, coerced to the schema', async () => {
      const response = await server.request({
        method: 'POST',
        url: BASE,
        headers: FORM,
        payload:
          'name=abc&rules[0][match][country][0]=US&rules[0][match][country][1]=CA' +
          '&rules[1][match][browser][exists]=false&rules[1][not_match][domain][starts_with][0]=admin.',
      });
      assert.equal(response.statusCode, 201, response.body);
      assert.deepEqual(response.json().rules, [
        { match: { country: ['US', 'CA'] } },
        { match: { browser: { exists: false } }, not_match: { domain: { starts_with: ['admin.'] } } },
      ]);
      const patched = await server.request({
        method: 'PATCH',
        url: `${BASE}/${response.json().id}`,
        headers: FORM,
        payload: 'description=from%20a%20form',
      });
      assert.equal(patched.json().description, 'from a form');
    });

    it('refuses invalid bodies with 400 invalid_body naming the property, storing nothing', async () => {
      const before = await count();
      const cases: Array<[unknown, string]> = [
        [{ rules: [{ match: { country: ['US'] } }] }, "Payload validation error: 'Missing required property: name'."],
        [
          { name: 'ab', rules: [{ match: { country: ['US'] } }] },
          "Payload validation error: 'String is too short (2 chars), minimum 3' on property name (Name of the segment).",
        ],
        [
          { name: ' lead', rules: [{ match: { country: ['US'] } }] },
          "Payload validation error: 'String does not match pattern ^(?!.*\\x00)\\S(.*\\S)?$:  lead' on property name (Name of the segment).",
        ],
        // `.` stops at line breaks, so a name spanning lines never matches the pattern.
        [
          { name: 'two\nlines', rules: [{ match: { country: ['US'] } }] },
          "Payload validation error: 'String does not match pattern ^(?!.*\\x00)\\S(.*\\S)?$: two\nlines' on property name (Name of the segment).",
        ],
        [
          { name: 'nul\u0000inside', rules: [{ match: { country: ['US'] } }] },
          "Payload validation error: 'String does not match pattern ^(?!.*\\x00)\\S(.*\\S)?$: nul\u0000inside' on property name (Name of the segment).",
        ],
        [
          { name: 'valid', description: 'x ', rules: [{ match: { country: ['US'] } }] },
          "Payload validation error: 'String is too short (2 chars), minimum 3' on property description (Description of the segment).",
        ],
        [
          { name: 'valid', rules: [] },
          "Payload validation error: 'Array is too short (0), minimum 1' on property rules (An ordered list of rules. A segment matches if any rule matches.).",
        ],
        [
          { name: 'valid', rules: Array.from({ length: 101 }, () => ({ match: { country: ['US'] } })) },
          "Payload validation error: 'Array is too long (101), maximum 100' on property rules (An ordered list of rules. A segment matches if any rule matches.).",
        ],
        [
          { name: 'valid', rules: [{}] },
          "Payload validation error: 'Too few properties defined (0), minimum 1' on property rules[0].",
        ],
        [
          { name: 'valid', rules: [{ matches: {} }] },
          "Payload validation error: 'Additional properties not allowed: matches' on property rules[0].",
        ],
        [
          { name: 'valid', rules: [{ match: {} }] },
          "Payload validation error: 'Too few properties defined (0), minimum 1' on property rules[0].match.",
        ],
        [
          { name: 'valid', rules: [{ not_match: { city: ['Paris'] } }] },
          "Payload validation error: 'Additional properties not allowed: city' on property rules[0].not_match.",
        ],
        [
          { name: 'valid', rules: [{ match: { country: { contains: ['a'], ends_with: ['b'] } } }] },
          'rules[0].match.country (one of:',
        ],
        [{ name: 'valid', rules: [{ match: { country: [] } }] }, 'rules[0].match.country (one of:'],
        [{ name: 'valid', rules: [{ match: { region: { exists: 'yes' } } }] }, 'rules[0].match.region (one of:'],
        [
          { name: 'valid', rules: [{ match: { user_agent: ['x'.repeat(1025)] } }] },
          'rules[0].match.user_agent (one of:',
        ],
        [
          { name: 'valid', rules: [{ match: { country: ['US'] } }], type: 'svc' },
          "Payload validation error: 'Additional properties not allowed: type'.",
        ],
      ];
      for (const [payload, message] of cases) {
        const response = await create(payload);
        assert.equal(response.statusCode, 400, JSON.stringify(payload));
        const body = response.json();
        assert.equal(body.errorCode, 'invalid_body');
        if (message.startsWith('Payload')) assert.equal(body.message, message);
        else {
          assert.match(
            body.message,
            /^Payload validation error: 'Data does not match any schemas from 'oneOf'' on property /,
          );
          assert.ok(body.message.includes(message), body.message);
        }
      }
      const all = Object.fromEntries(
        [
          'client_id',
          'connection',
          'connection_type',
          'organization_id',
          'domain',
          'device_type',
          'browser',
          'platform',
          'user_agent',
          'country',
          'region',
        ].map((k) => [k, ['x']]),
      );
      const tooMany = await create({ name: 'valid', rules: [{ match: all }] });
      assert.equal(
        tooMany.json().message,
        "Payload validation error: 'Too many properties defined (11), maximum 10' on property rules[0].match.",
      );
      assert.equal(await count(), before);
    });

    it("refuses more than 1,000 patterns in all of a segment's contains, starts_with and ends_with, storing nothing", async () => {
      const patterns = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
      // 1,000 across two rules and three forms, with a long list of whole values beside them (not counted).
      const fits = [
        { match: { user_agent: { contains: patterns(600, 'c') }, country: patterns(2000, 'v') } },
        {
          match: { browser: { starts_with: patterns(300, 's') } },
          not_match: { platform: { ends_with: patterns(100, 'e') } },
        },
      ];
      const created = await create({ name: 'Many patterns', rules: fits });
      assert.equal(created.statusCode, 201, created.body.slice(0, 200));
      const before = await count();
      const over = [...fits, { match: { user_agent: { contains: ['one more'] } } }];
      const refused = await create({ name: 'Too many patterns', rules: over });
      assert.deepEqual(refused.json(), {
        statusCode: 400,
        error: 'Bad Request',
        message:
          "Payload validation error: 'Too many patterns (1001): at most 1000 in all of a segment's contains, starts_with and ends_with' on property rules.",
        errorCode: 'invalid_body',
      });
      // A flood of one-character patterns (200,000 held the event loop 1.2 s an evaluation).
      const flood = await create({
        name: 'Flood',
        rules: [{ match: { user_agent: { contains: Array(200_000).fill('b') } } }],
      });
      assert.equal(flood.statusCode, 400);
      const patched = await patch(created.json().id, { rules: over });
      assert.equal(patched.statusCode, 400);
      assert.match(patched.json().message, /Too many patterns \(1001\)/);
      assert.equal(await count(), before);
      assert.deepEqual((await read(created.json().id)).json().rules, fits);
    });

    it('answers 409 for a name taken, on create and on rename, including concurrent creates', async () => {
      const rules = [{ match: { country: ['FR'] } }];
      assert.equal((await create({ name: 'Taken', rules })).statusCode, 201);
      const dupe = await create({ name: 'Taken', rules });
      assert.deepEqual(dupe.json(), conflictBody);
      const other = (await create({ name: 'Other', rules })).json();
      const rename = await patch(other.id, { name: 'Taken' });
      assert.deepEqual(rename.json(), conflictBody);
      assert.equal((await read(other.id)).json().name, 'Other');
      const racing = await Promise.all([1, 2, 3].map(() => create({ name: 'Racing', rules })));
      assert.deepEqual(racing.map((r) => r.statusCode).sort(), [201, 409, 409]);
      // Names are unique per tenant only.
      const { token } = await server.addTenant('segments-other', 'segments-other.test');
      const elsewhere = await server.request({
        method: 'POST',
        url: BASE,
        headers: { host: 'segments-other.test' },
        token,
        payload: { name: 'Taken', rules },
      });
      assert.equal(elsewhere.statusCode, 201);
    });

    it('PATCH: partial, rules replaced whole, description null clears, empty body refused', async () => {
      const segment = (
        await create({
          name: 'Patchable',
          description: 'Before',
          rules: [{ match: { country: ['US'] } }, { match: { region: ['CA'] } }],
        })
      ).json();
      const renamed = await patch(segment.id, { name: 'Patched' });
      assert.equal(renamed.statusCode, 200);
      assert.deepEqual(Object.keys(renamed.json()), KEY_ORDER);
      assert.equal(renamed.json().description, 'Before');
      assert.deepEqual(renamed.json().rules, segment.rules);
      const replaced = (
        await patch(segment.id, { rules: [{ not_match: { platform: { contains: ['Linux'] } } }] })
      ).json();
      assert.deepEqual(replaced.rules, [{ not_match: { platform: { contains: ['Linux'] } } }]);
      const cleared = (await patch(segment.id, { description: null })).json();
      assert.equal('description' in cleared, false);
      assert.deepEqual(
        Object.keys(cleared),
        KEY_ORDER.filter((k) => k !== 'description'),
      );
      assert.deepEqual((await read(segment.id)).json(), cleared);
      assert.equal(cleared.created_at, segment.created_at);
      assert.ok(cleared.updated_at > segment.updated_at);

      const empty = await patch(segment.id, {});
      assert.deepEqual(empty.json(), {
        statusCode: 400,
        error: 'Bad Request',
        message: "Payload validation error: 'Too few properties defined (0), minimum 1'.",
        errorCode: 'invalid_body',
      });
      assert.equal((await patch(segment.id, { rules: [] })).json().errorCode, 'invalid_body');
      assert.equal(
        (await patch(segment.id, { id: 'seg_x' })).json().message,
        "Payload validation error: 'Additional properties not allowed: id'.",
      );
      assert.deepEqual((await read(segment.id)).json(), cleared);
    });

    it('moves updated_at strictly forward, even within one millisecond or with the clock stepping back', async () => {
      const { segments } = server.services;
      const tenantId = server.tenant.id;
      const segment = (await create({ name: 'Clockwork', rules: [{ match: { country: ['US'] } }] })).json();
      const frozen = Date.parse(segment.updated_at) + 1000;
      mock.timers.enable({ apis: ['Date'], now: frozen });
      try {
        const first = await segments.update(tenantId, segment.id, { description: 'one' });
        const second = await segments.update(tenantId, segment.id, { description: 'two' });
        assert.equal(first.updated_at, new Date(frozen).toISOString());
        assert.equal(second.updated_at, new Date(frozen + 1).toISOString());
        mock.timers.setTime(frozen - 60_000);
        const third = await segments.update(tenantId, segment.id, { description: 'three' });
        assert.equal(third.updated_at, new Date(frozen + 2).toISOString());
        assert.equal(third.created_at, segment.created_at);
      } finally {
        mock.timers.reset();
      }
    });

    it('answers 404 for an unknown segment, 400 invalid_uri for a malformed id; DELETE is idempotent', async () => {
      const unknown = 'seg_1111111111111111111111';
      assert.deepEqual((await read(unknown)).json(), notFoundBody);
      assert.deepEqual((await patch(unknown, { name: 'whatever' })).json(), notFoundBody);
      const evaluated = await server.request({ method: 'POST', url: `${BASE}/${unknown}/evaluate`, payload: {} });
      assert.deepEqual(evaluated.json(), notFoundBody);
      const bad = await read('seg_0OIl');
      assert.deepEqual(bad.json(), {
        statusCode: 400,
        error: 'Bad Request',
        message:
          "Path validation error: 'Object didn't pass validation for format segment-id: seg_0OIl' on property id (Unique identifier for the segment).",
        errorCode: 'invalid_uri',
      });
      assert.equal((await server.request({ method: 'DELETE', url: `${BASE}/nope` })).json().errorCode, 'invalid_uri');

      const segment = (await create({ name: 'Doomed', rules: [{ match: { country: ['US'] } }] })).json();
      for (let i = 0; i < 2; i++) {
        const removed = await server.request({ method: 'DELETE', url: `${BASE}/${segment.id}` });
        assert.equal(removed.statusCode, 204);
        assert.equal(removed.body, '');
      }
      assert.deepEqual((await read(segment.id)).json(), notFoundBody);
      assert.equal((await server.request({ method: 'DELETE', url: `${BASE}/${unknown}` })).statusCode, 204);
    });

    it('enforces the experimentation scopes', async () => {
      const { token: readOnly } = await server.clientWithScopes(['read:experimentation']);
      const segment = (await create({ name: 'Scoped', rules: [{ match: { country: ['US'] } }] })).json();
      const refused = await create({ name: 'Scoped 2', rules: [{ match: { country: ['US'] } }] }, readOnly);
      assert.deepEqual(refused.json(), {
        statusCode: 403,
        error: 'Forbidden',
        message: 'Insufficient scope, expected any of: create:experimentation',
        errorCode: 'insufficient_scope',
      });
      const asReader = (options: { method?: 'PATCH' | 'DELETE' | 'POST' | 'GET'; url: string; payload?: object }) =>
        server.request({ ...options, token: readOnly });
      assert.equal((await asReader({ url: `${BASE}/${segment.id}` })).statusCode, 200);
      assert.equal((await asReader({ url: BASE })).statusCode, 200);
      assert.equal(
        (await asReader({ method: 'POST', url: `${BASE}/${segment.id}/evaluate`, payload: {} })).statusCode,
        200,
      );
      assert.equal(
        (await asReader({ method: 'PATCH', url: `${BASE}/${segment.id}`, payload: { name: 'x y z' } })).json().message,
        'Insufficient scope, expected any of: update:experimentation',
      );
      assert.equal(
        (await asReader({ method: 'DELETE', url: `${BASE}/${segment.id}` })).json().message,
        'Insufficient scope, expected any of: delete:experimentation',
      );
      const { token: writer } = await server.clientWithScopes(['create:experimentation']);
      assert.equal((await server.request({ url: BASE, token: writer })).statusCode, 403);
      assert.equal((await read(segment.id)).json().name, 'Scoped');
    });

    it('pages with an opaque cursor and filters by type (auth0 as an alias of svc)', async () => {
      const host = 'segments-paging.test';
      const { tenant, token } = await server.addTenant('segments-paging', host);
      const list = (query: string) => server.request({ url: `${BASE}${query}`, headers: { host }, token });
      assert.deepEqual((await list('')).json(), { segments: [] });
      const created: string[] = [];
      for (let i = 0; i < 7; i++) {
        created.push(
          (
            await server.request({
              method: 'POST',
              url: BASE,
              headers: { host },
              token,
              payload: { name: `Segment ${i}`, rules: [{ match: { country: ['US'] } }] },
            })
          ).json().id,
        );
      }
      const seen: string[] = [];
      let query = '?take=3';
      const sizes: number[] = [];
      for (;;) {
        const page = (await list(query)).json();
        sizes.push(page.segments.length);
        seen.push(...page.segments.map((s: { id: string }) => s.id));
        if (page.next === undefined) {
          assert.deepEqual(Object.keys(page), ['segments']);
          break;
        }
        assert.match(page.next, /^[A-Za-z0-9_-]+$/);
        query = `?take=3&from=${page.next}`;
      }
      assert.deepEqual(sizes, [3, 3, 1]);
      assert.deepEqual([...seen].sort(), [...created].sort());
      assert.equal(new Set(seen).size, 7);
      assert.equal((await list('')).json().segments.length, 7);

      const provided = {
        tenant_id: tenant.id,
        id: 'seg_ProvidedBySvc',
        name: 'Provided',
        description: null,
        type: 'svc' as const,
        rules: JSON.stringify([{ match: { connection_type: ['enterprise'] } }]),
        created_at: '2026-01-01T00:00:00.000Z',
        updated_at: '2026-01-01T00:00:00.000Z',
      };
      await server.services.database.db.insertInto('segments').values(provided).execute();
      const ids = async (q: string) => (await list(q)).json().segments.map((s: { id: string }) => s.id);
      assert.deepEqual(await ids('?type=svc'), [provided.id]);
      assert.deepEqual(await ids('?type=auth0'), [provided.id]);
      assert.deepEqual((await ids('?type=self&take=50')).sort(), [...created].sort());
      assert.equal((await list('?type=svc')).json().segments[0].type, 'svc');
      // Provided segments are read-only.
      const locked = { statusCode: 403, error: 'Forbidden', message: 'Segment cannot be modified.' };
      assert.deepEqual(
        (
          await server.request({
            method: 'PATCH',
            url: `${BASE}/${provided.id}`,
            headers: { host },
            token,
            payload: { name: 'Mine' },
          })
        ).json(),
        locked,
      );
      assert.deepEqual(
        (await server.request({ method: 'DELETE', url: `${BASE}/${provided.id}`, headers: { host }, token })).json(),
        locked,
      );

      for (const bad of [
        'take=0',
        'take=51',
        'type=other',
        'from=!!!',
        `from=${Buffer.from('not-a-segment').toString('base64url')}`,
        'from=c2VnXzE%3D',
        'unknown=1',
      ]) {
        const response = await list(`?${bad}`);
        assert.equal(response.statusCode, 400, bad);
        assert.equal(response.json().errorCode, 'invalid_query_string', bad);
      }
      // The other tenant's segments never show up here, and this tenant's are not visible there.
      assert.equal((await server.request({ url: `${BASE}/${created[0]}` })).statusCode, 404);
    });

    it('evaluates a segment against a sign-in context', async () => {
      const segment = (
        await create({
          name: 'Evaluated',
          rules: [
            { match: { country: ['US'], domain: { ends_with: ['@corp.example'] } } },
            { match: { connection: { exists: true } }, not_match: { connection_type: ['social'] } },
          ],
        })
      ).json();
      const evaluate = (payload: unknown) =>
        server.request({ method: 'POST', url: `${BASE}/${segment.id}/evaluate`, payload: payload as object });
      assert.deepEqual((await evaluate({ country: 'US', domain: 'me@corp.example' })).json(), {
        matches: true,
        rule_index: 0,
      });
      assert.deepEqual((await evaluate({ country: 'US', domain: 'me@corp.example', connection: 'db' })).json(), {
        matches: true,
        rule_index: 0,
      });
      assert.deepEqual((await evaluate({ connection: 'db', connection_type: 'database' })).json(), {
        matches: true,
        rule_index: 1,
      });
      assert.deepEqual((await evaluate({ connection: 'google', connection_type: 'social' })).json(), {
        matches: false,
        rule_index: null,
      });
      assert.deepEqual((await evaluate({})).json(), { matches: false, rule_index: null });
      const form = await server.request({
        method: 'POST',
        url: `${BASE}/${segment.id}/evaluate`,
        headers: FORM,
        payload: 'country=US&domain=a%40corp.example',
      });
      assert.deepEqual(form.json(), { matches: true, rule_index: 0 });
      const unknownKey = await evaluate({ city: 'Paris' });
      assert.deepEqual(unknownKey.json(), {
        statusCode: 400,
        error: 'Bad Request',
        message: "Payload validation error: 'Additional properties not allowed: city'.",
        errorCode: 'invalid_body',
      });
      assert.equal(
        (await evaluate({ country: 1 })).json().message,
        "Payload validation error: 'Expected type string but found type integer' on property country.",
      );
    });
  });
}
