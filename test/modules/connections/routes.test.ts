import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { databaseKinds } from '../../helpers/databases.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

const DEFAULT = 'Username-Password-Authentication';

interface Listed {
  id: string;
  name: string;
  strategy: string;
}

for (const kind of databaseKinds()) {
  describe(`GET /connections and GET /connections/{id} (${kind})`, () => {
    let server: TestServer;
    let other: { token: string };
    before(async () => {
      server = await startTestServer(kind);
      other = await server.addTenant('other-tenant', 'other.test');
    });
    after(() => server.close());

    const get = (url: string, token?: string | null) => server.request({ url: `/api/v2/connections${url}`, token });
    const json = async (url: string) => {
      const response = await get(url);
      assert.equal(response.statusCode, 200, response.body);
      return response.json();
    };
    const badQuery = async (query: string, message: RegExp) => {
      const response = await get(`?${query}`);
      assert.equal(response.statusCode, 400, `${query}: ${response.body}`);
      const body = response.json();
      assert.deepEqual(Object.keys(body), ['statusCode', 'error', 'message', 'errorCode']);
      assert.equal(body.error, 'Bad Request');
      assert.equal(body.errorCode, 'invalid_query_string');
      assert.match(body.message, message, query);
    };

    it("lists a fresh tenant's own database connection, in the original's shape, and reads it by id", async () => {
      const list = await json('');
      assert.ok(Array.isArray(list), 'a bare array without paging parameters');
      assert.equal(list.length, 1);
      const [connection] = list;
      assert.match(connection.id, /^con_[0-9A-Za-z]{16}$/);
      assert.deepEqual(connection, {
        id: connection.id,
        options: {},
        strategy: 'svc',
        name: DEFAULT,
        is_domain_connection: false,
        realms: [DEFAULT],
      });
      const read = await get(`/${connection.id}`);
      assert.equal(read.statusCode, 200);
      assert.equal(read.headers['content-type'], 'application/json; charset=utf-8');
      assert.deepEqual(read.json(), connection);
      // The id users are created in: the same connection the users module resolves by name.
      assert.equal((await server.services.connections.byName(server.tenant.id, DEFAULT))?.id, connection.id);
    });

    it('filters by name and by strategy (repeated, and `auth0` for the own database), and projects fields', async () => {
      await server.services.connections.ensure(server.tenant.id, 'google-oauth2', 'google-oauth2');
      await server.services.connections.ensure(server.tenant.id, 'github', 'github');
      const names = (list: Listed[]) => list.map((c) => c.name).sort();

      assert.deepEqual(names(await json('')), [DEFAULT, 'github', 'google-oauth2']);
      assert.deepEqual(names(await json('?name=github')), ['github']);
      assert.deepEqual(await json('?name=nope'), []);
      assert.deepEqual(names(await json('?strategy=auth0')), [DEFAULT]);
      assert.deepEqual(names(await json('?strategy=svc')), [DEFAULT]);
      assert.deepEqual(names(await json('?strategy=github&strategy=google-oauth2')), ['github', 'google-oauth2']);
      assert.deepEqual(await json('?strategy=samlp'), []);
      assert.deepEqual(await json('?strategy=github&name=google-oauth2'), []);

      for (const item of await json('?fields=id,name')) assert.deepEqual(Object.keys(item).sort(), ['id', 'name']);
      for (const item of await json('?fields=options,realms&include_fields=false')) {
        assert.deepEqual(Object.keys(item).sort(), ['id', 'is_domain_connection', 'name', 'strategy']);
      }
      const github = (await json('?name=github'))[0];
      assert.deepEqual(await json(`/${github.id}?fields=strategy`), { strategy: 'github' });
      assert.deepEqual(Object.keys(await json(`/${github.id}?fields=strategy&include_fields=false`)).sort(), [
        'id',
        'is_domain_connection',
        'name',
        'options',
        'realms',
      ]);
      assert.equal(Object.keys(await json(`/${github.id}?fields=`)).length, 6);
    });

    it('pages by offset: per_page and page, with {start, limit, total, connections} when include_totals', async () => {
      const all: Listed[] = await json('');
      assert.equal(all.length, 3);
      const ids = all.map((c) => c.id);
      assert.deepEqual(
        ids,
        [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)),
        'in id order',
      );
      assert.deepEqual(
        (await json('?per_page=2&page=0')).map((c: Listed) => c.id),
        ids.slice(0, 2),
      );
      assert.deepEqual(
        (await json('?per_page=2&page=1')).map((c: Listed) => c.id),
        ids.slice(2),
      );
      assert.deepEqual(await json('?per_page=2&page=5'), []);
      const totals = await json('?per_page=2&page=1&include_totals=true');
      assert.deepEqual(Object.keys(totals), ['start', 'limit', 'total', 'connections']);
      assert.equal(totals.start, 2);
      assert.equal(totals.limit, 2);
      assert.equal(totals.total, 3);
      assert.deepEqual(
        totals.connections.map((c: Listed) => c.id),
        ids.slice(2),
      );
      const filtered = await json('?include_totals=true&strategy=github');
      assert.equal(filtered.total, 1);
      assert.equal(filtered.start, 0);
      assert.ok(Array.isArray(await json('?include_totals=false')));
    });

    it('pages by checkpoint: from and take give {connections, next} and never totals', async () => {
      const ids = (await json('')).map((c: Listed) => c.id);
      const first = await json('?take=2&include_totals=true');
      assert.deepEqual(Object.keys(first), ['connections', 'next']);
      assert.deepEqual(
        first.connections.map((c: Listed) => c.id),
        ids.slice(0, 2),
      );
      const second = await json(`?take=2&from=${encodeURIComponent(first.next)}`);
      assert.deepEqual(second, { connections: [(await json(`/${ids[2]}`)) as Listed] });
      assert.deepEqual(Object.keys(await json('?take=3')), ['connections'], 'no next after the last page');
      const walked: string[] = [];
      let from: string | undefined;
      do {
        const page = await json(`?take=1${from ? `&from=${encodeURIComponent(from)}` : ''}`);
        walked.push(...page.connections.map((c: Listed) => c.id));
        from = page.next;
      } while (from);
      assert.deepEqual(walked, ids);
      assert.deepEqual(
        (await json('?take=5&strategy=github')).connections.map((c: Listed) => c.name),
        ['github'],
      );
    });

    it('refuses bad paging values, unknown parameters and wrong types with 400 invalid_query_string', async () => {
      await badQuery('per_page=0', /^Query validation error: 'Value 0 is less than minimum 1' on property per_page/);
      await badQuery('per_page=101', /'Value 101 is greater than maximum 100' on property per_page/);
      await badQuery('per_page=abc', /on property per_page/);
      await badQuery('page=-1', /'Value -1 is less than minimum 0' on property page/);
      await badQuery('page=1.5', /on property page/);
      await badQuery('take=0', /on property take/);
      await badQuery('take=101', /on property take/);
      await badQuery('include_totals=maybe', /on property include_totals/);
      await badQuery('include_fields=sometimes', /on property include_fields/);
      await badQuery('from=not-a-cursor', /'Invalid cursor' on property from/);
      await badQuery('name=', /on property name/);
      await badQuery('strategy=', /on property strategy/);
      await badQuery(
        'domain_alias=example.com',
        /^Query validation error: 'Additional properties not allowed: domain_alias'\.$/,
      );
      const unknown = await get('/con_0000000000000000?per_page=1');
      assert.equal(unknown.statusCode, 400);
      assert.equal(unknown.json().message, "Query validation error: 'Additional properties not allowed: per_page'.");
    });

    it('refuses malformed ids with 400 invalid_uri', async () => {
      for (const id of [
        'nope',
        'con_short',
        'con_0000000000000000x',
        'cd_0000000000000000',
        'con_00000000000000%2F0',
      ]) {
        const response = await get(`/${id}`);
        assert.equal(response.statusCode, 400, `${id}: ${response.body}`);
        assert.equal(response.json().errorCode, 'invalid_uri');
      }
      assert.deepEqual((await get('/nope')).json(), {
        statusCode: 400,
        error: 'Bad Request',
        message:
          "Path validation error: 'Object didn't pass validation for format connection-id: nope' on property id (The id of the connection to retrieve).",
        errorCode: 'invalid_uri',
      });
    });

    it("answers 404 for an unknown id and for another tenant's connection, which no list shows", async () => {
      const notFound = {
        statusCode: 404,
        error: 'Not Found',
        message: 'The connection does not exist.',
        errorCode: 'inexistent_connection',
      };
      const unknown = await get('/con_0000000000000000');
      assert.equal(unknown.statusCode, 404);
      assert.deepEqual(unknown.json(), notFound);

      const theirs = await server.request({
        url: '/api/v2/connections',
        headers: { host: 'other.test' },
        token: other.token,
      });
      assert.equal(theirs.statusCode, 200);
      const [their] = theirs.json();
      assert.equal(their.name, DEFAULT);
      const mine: Listed[] = await json('');
      assert.ok(!mine.some((c) => c.id === their.id));

      const crossed = await get(`/${their.id}`);
      assert.equal(crossed.statusCode, 404);
      assert.deepEqual(crossed.json(), notFound);
      // Their token on our host is not theirs to use here either.
      const foreignToken = await get(`/${their.id}`, other.token);
      assert.equal(foreignToken.statusCode, 401);
      // And our connection from their side.
      const back = await server.request({
        url: `/api/v2/connections/${mine[0]!.id}`,
        headers: { host: 'other.test' },
        token: other.token,
      });
      assert.deepEqual(back.json(), notFound);
    });

    it('needs a token (401) with read:connections (403, in the original words)', async () => {
      const connection = (await json(''))[0] as Listed;
      for (const url of ['', `/${connection.id}`]) {
        const anonymous = await get(url, null);
        assert.equal(anonymous.statusCode, 401, anonymous.body);
        assert.equal(anonymous.json().statusCode, 401);
        assert.equal(anonymous.json().error, 'Unauthorized');
      }
      const { token } = await server.clientWithScopes(['read:users', 'create:connections', 'update:connections']);
      for (const url of ['', `/${connection.id}`, '?per_page=0', '/nope']) {
        const refused = await get(url, token);
        assert.equal(refused.statusCode, 403, `${url}: ${refused.body}`);
        assert.deepEqual(refused.json(), {
          statusCode: 403,
          error: 'Forbidden',
          message: 'Insufficient scope, expected any of: read:connections',
          errorCode: 'insufficient_scope',
        });
      }
      const reader = await server.clientWithScopes(['read:connections']);
      assert.equal((await get(`/${connection.id}`, reader.token)).statusCode, 200);
    });
  });
}
