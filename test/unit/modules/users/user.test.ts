import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { applyProfileChanges, buildUser, separateIdpTokens, type User } from '../../../../src/modules/users/user.ts';

const AT = '2024-01-02T03:04:05.000Z';
const own = { connection: 'Username-Password-Authentication', user_id: 'abc', provider: 'svc', isSocial: false };
const google = { connection: 'google-oauth2', user_id: '42', provider: 'google-oauth2', isSocial: true };

describe('buildUser', () => {
  it('fills the original defaults: name is the email, nickname its local part, a Gravatar picture', () => {
    const user = buildUser({ email: 'jane.doe@example.com' }, [own], 'svc|abc', AT);
    assert.equal(user.name, 'jane.doe@example.com');
    assert.equal(user.nickname, 'jane.doe');
    assert.equal(user.email_verified, false);
    assert.equal(user.blocked, false);
    assert.match(user.picture!, /^https:\/\/s\.gravatar\.com\/avatar\/[0-9a-f]{32}\?s=480&r=pg&d=identicon$/);
    assert.equal(user.created_at, AT);
    assert.equal(user.updated_at, AT);
  });

  it('omits unset members, phone_verified included when there is no phone number', () => {
    const user = buildUser({ username: 'jane' }, [own], 'svc|abc', AT);
    assert.equal('email' in user, false);
    assert.equal('email_verified' in user, false);
    assert.equal('phone_verified' in user, false);
    assert.equal(user.name, 'jane');
    assert.equal(user.nickname, 'jane');
  });

  it('stores its members in the original order, whichever are set', () => {
    const full = buildUser(
      {
        app_metadata: { a: 1 },
        username: 'jane',
        user_metadata: { b: 2 },
        phone_verified: true,
        phone_number: '+15550100',
        given_name: 'Jane',
        family_name: 'Doe',
        email: 'Jane@Example.com',
        blocked: true,
      },
      [own],
      'svc|abc',
      AT,
    );
    assert.deepEqual(Object.keys(full), [
      'blocked',
      'created_at',
      'email',
      'email_verified',
      'family_name',
      'given_name',
      'identities',
      'name',
      'nickname',
      'phone_number',
      'phone_verified',
      'picture',
      'updated_at',
      'user_id',
      'user_metadata',
      'username',
      'app_metadata',
    ]);
    assert.equal(
      JSON.stringify(buildUser({ given_name: 'Jane', email: 'jane@example.com' }, [own], 'svc|abc', AT)),
      JSON.stringify({
        blocked: false,
        created_at: AT,
        email: 'jane@example.com',
        email_verified: false,
        given_name: 'Jane',
        identities: [own],
        name: 'jane@example.com',
        nickname: 'jane',
        // md5 of the email, as Gravatar takes it.
        picture: 'https://s.gravatar.com/avatar/9e26471d35a78862c17e467d87cddedf?s=480&r=pg&d=identicon',
        updated_at: AT,
        user_id: 'svc|abc',
      }),
    );
  });
});

describe('separateIdpTokens', () => {
  it('moves the tokens off the identities, one entry per identity; null when there are none', () => {
    const { identities, tokens } = separateIdpTokens([own, { ...google, access_token: 'at', refresh_token: 'rt' }]);
    assert.deepEqual(identities, [own, google]);
    assert.deepEqual(tokens, [{}, { access_token: 'at', refresh_token: 'rt' }]);
    assert.equal(separateIdpTokens([own, google]).tokens, null);
  });
});

describe('applyProfileChanges', () => {
  const stored = (identities = [own]): User => ({
    ...buildUser(
      { email: 'a@example.com', user_metadata: { keep: 1, drop: 2 }, app_metadata: { plan: 'free' } },
      identities,
      'svc|abc',
      AT,
    ),
  });

  it('merges metadata one level deep, a null member removing its key', () => {
    const changed = applyProfileChanges(stored(), {
      user_metadata: { drop: null, added: { deep: true } } as never,
      app_metadata: { plan: 'pro' },
    });
    assert.deepEqual(changed.user_metadata, { keep: 1, added: { deep: true } });
    assert.deepEqual(changed.app_metadata, { plan: 'pro' });
  });

  it('replaces other members and leaves the stored user as it was', () => {
    const before = stored();
    const changed = applyProfileChanges(before, { given_name: 'Ann', blocked: true });
    assert.equal(changed.given_name, 'Ann');
    assert.equal(changed.blocked, true);
    assert.equal(before.given_name, undefined);
    assert.equal(before.blocked, false);
  });

  it('lower-cases a new email for the server’s own users only', () => {
    assert.equal(applyProfileChanges(stored(), { email: 'New@Example.COM' }).email, 'new@example.com');
    assert.equal(
      applyProfileChanges(stored([{ ...own, provider: 'auth0' }]), { email: 'New@Example.COM' }).email,
      'new@example.com',
    );
    assert.equal(applyProfileChanges(stored([google]), { email: 'New@Example.COM' }).email, 'New@Example.COM');
  });

  it('marks a changed email unverified unless the change says otherwise', () => {
    const verified = { ...stored(), email_verified: true };
    assert.equal(applyProfileChanges(verified, { email: 'other@example.com' }).email_verified, false);
    assert.equal(
      applyProfileChanges(verified, { email: 'other@example.com', email_verified: true }).email_verified,
      true,
    );
    // The same address (in another case, which is kept lower-cased) is no change.
    assert.equal(applyProfileChanges(verified, { email: 'A@Example.com' }).email_verified, true);
    assert.equal(applyProfileChanges(verified, { given_name: 'Ann' }).email_verified, true);
  });
});
