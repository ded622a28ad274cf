import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { compilePending } from '../../src/http/validation/ajv.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

// Route validators compile on their first use (start-up time): a schema Ajv cannot compile would
// otherwise show only when its route is first called. Here every one is compiled up front.
describe('route schemas', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer('sqlite');
  });
  after(() => server.close());

  it('all compile, and none was compiled before a request needed it', async () => {
    const compiled = compilePending();
    assert.ok(compiled >= 30, `${compiled} validators compiled`);
    assert.equal(compilePending(), 0);
    // Compiled, they still judge: a body with an unknown member is refused as before.
    const response = await server.request({ method: 'POST', url: '/api/v2/users', payload: { nope: 1 } });
    assert.equal(response.statusCode, 400, response.body);
  });
});
