import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { eachDatabase } from '../helpers/databases.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

/**
 * A JSON body may escape half of a UTF-16 surrogate pair (`"\ud800"`), which no UTF-8 text can hold: a
 * text column stored U+FFFD in its place, so an event stream's name or an email template was answered
 * as sent and read back changed. Every body holding one, in a value or a key, is refused with 400 and
 * changes nothing; a whole pair, escaped or not, is text and comes back as sent.
 */
describe('lone surrogates in JSON bodies', () => {
  eachDatabase((kind) => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(kind, { DELIVERY_ALLOW_HTTP: 'true' });
    });
    after(() => server.close());

    const stream = (name: string) => ({
      name,
      subscriptions: [{ event_type: 'user.created' }],
      destination: {
        type: 'webhook',
        configuration: {
          webhook_endpoint: 'https://example.com/hook',
          webhook_authorization: { method: 'bearer', token: 'lone-surrogate-token' },
        },
      },
    });
    const refused = (response: { statusCode: number; json: () => unknown; body: string }) => {
      assert.equal(response.statusCode, 400, response.body);
      assert.deepEqual(response.json(), {
        statusCode: 400,
        error: 'Bad Request',
        message:
          'Invalid request payload: a string holds a lone UTF-16 surrogate (an escape from \\ud800 to \\udfff without its pair), which is not text',
        errorCode: 'invalid_body',
      });
    };
    const streamCount = async () =>
      (await server.services.database.db.selectFrom('event_streams').select('id').execute()).length;

    it('refuses one in a value or a key of any body, and stores nothing', async () => {
      const before = await streamCount();
      // Sent as the JSON text a client writes: JSON.stringify escapes a lone surrogate as \ud800.
      refused(await server.request({ method: 'POST', url: '/api/v2/event-streams', payload: stream('a\ud800bc') }));
      refused(await server.request({ method: 'POST', url: '/api/v2/event-streams', payload: stream('\udfff') }));
      // A high half after its low half is no pair.
      refused(await server.request({ method: 'POST', url: '/api/v2/event-streams', payload: stream('\ude00\ud83d') }));
      // Written by hand, in upper case, in a nested member.
      refused(
        await server.request({
          method: 'POST',
          url: '/api/v2/event-streams',
          headers: { 'content-type': 'application/json' },
          payload: JSON.stringify(stream('x')).replace('"https://example.com/hook"', '"https://example.com/\\uD800"'),
        }),
      );
      assert.equal(await streamCount(), before);

      const template = await server.request({ method: 'GET', url: '/api/v2/email-templates/verify_email' });
      refused(
        await server.request({
          method: 'PATCH',
          url: '/api/v2/email-templates/verify_email',
          payload: { body: '<p>\ud800</p>', subject: 'Hello' },
        }),
      );
      assert.equal(
        (await server.request({ method: 'GET', url: '/api/v2/email-templates/verify_email' })).body,
        template.body,
      );

      refused(
        await server.request({
          method: 'POST',
          url: '/api/v2/experimentation/segments',
          payload: { name: 'ab\ud800c', conditions: { country_code: ['NZ'] } },
        }),
      );
      refused(
        await server.request({
          method: 'POST',
          url: '/api/v2/users',
          payload: {
            connection: 'Username-Password-Authentication',
            email: 'lone-key@example.com',
            password: 'Lone-Surrogate-Passw0rd!',
            user_metadata: { ['k\udc00']: 1 },
          },
        }),
      );
      const users = await server.request({ method: 'GET', url: '/api/v2/users-by-email?email=lone-key@example.com' });
      assert.deepEqual(users.json(), []);
    });

    it('takes a whole pair, escaped or not, and answers it as stored', async () => {
      const escaped = await server.request({
        method: 'POST',
        url: '/api/v2/event-streams',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify(stream('pair')).replace('"pair"', '"pair \\ud83d\\ude00"'),
      });
      assert.equal(escaped.statusCode, 201, escaped.body);
      const raw = await server.request({ method: 'POST', url: '/api/v2/event-streams', payload: stream('raw 😀') });
      assert.equal(raw.statusCode, 201, raw.body);
      for (const [created, name] of [
        [escaped, 'pair 😀'],
        [raw, 'raw 😀'],
      ] as const) {
        assert.equal(created.json().name, name);
        const read = await server.request({ method: 'GET', url: `/api/v2/event-streams/${created.json().id}` });
        assert.equal(read.json().name, name);
      }
    });
  });
});
