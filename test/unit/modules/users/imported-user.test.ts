import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { userFromImport } from '../../../../src/modules/users/imported-user.ts';

const AT = '2024-01-02T03:04:05.000Z';
const fixedId = () => '0123456789abcdef01234567';

describe('userFromImport', () => {
  it('makes a record without identities a user of the own database connection, its email lower-cased', () => {
    const { user, connection, tokens, passwordHash } = userFromImport(
      { email: 'Jane@Example.com', password_hash: '$2b$10$x' },
      AT,
      fixedId,
    );
    assert.equal(user.user_id, 'svc|0123456789abcdef01234567');
    assert.equal(user.email, 'jane@example.com');
    assert.equal(connection, 'Username-Password-Authentication');
    assert.deepEqual(user.identities, [
      { connection, user_id: '0123456789abcdef01234567', provider: 'svc', isSocial: false },
    ]);
    assert.equal(tokens, null);
    assert.equal(passwordHash, '$2b$10$x');
  });

  it('takes the local id from a given user_id, and keeps the given user_id', () => {
    const { user } = userFromImport({ user_id: 'auth0|legacy-7', connection: 'Legacy' }, AT, fixedId);
    assert.equal(user.user_id, 'auth0|legacy-7');
    assert.deepEqual(user.identities, [
      { connection: 'Legacy', user_id: 'legacy-7', provider: 'svc', isSocial: false },
    ]);
  });

  it('names a social user after its first identity, keeps its email’s case, and splits off its tokens', () => {
    const { user, connection, tokens } = userFromImport(
      {
        email: 'Social.User@Example.com',
        identities: [
          { provider: 'github', connection: 'github', user_id: 42, isSocial: true, access_token: 'secret-token' },
        ],
      },
      AT,
      fixedId,
    );
    assert.equal(user.user_id, 'github|42');
    assert.equal(user.email, 'Social.User@Example.com');
    assert.equal(connection, 'github');
    assert.deepEqual(tokens, [{ access_token: 'secret-token' }]);
    assert.ok(!JSON.stringify(user).includes('secret-token'));
  });

  it('writes the original’s auth0 provider as the server’s own', () => {
    const { user } = userFromImport(
      { identities: [{ provider: 'auth0', connection: 'db', user_id: 'x1', isSocial: false }] },
      AT,
      fixedId,
    );
    assert.equal(user.user_id, 'svc|x1');
    assert.equal(user.identities[0]!.provider, 'svc');
  });
});
