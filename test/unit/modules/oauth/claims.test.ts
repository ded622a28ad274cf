import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkClaims, domainOfAudience, domainOfIssuer } from '../../../../src/modules/oauth/claims.ts';

const NOW = 1_800_000_000;
const domains = new Set(['tenant.test', 'login.brand.test']);
const valid = {
  iss: 'https://tenant.test/',
  sub: 'client-1@clients',
  aud: 'https://tenant.test/api/v2/',
  iat: NOW - 10,
  exp: NOW + 3600,
  scope: 'read:users  create:users',
  azp: 'client-1',
};

const refusedWith = (message: string) => (error: unknown) => {
  assert.equal((error as { statusCode?: number }).statusCode, 401);
  assert.equal((error as Error).message, message);
  return true;
};

describe('access token claims', () => {
  it('yields the client, its scopes, expiry and the domains that made the token valid', () => {
    const aud = ['https://other.test/api/v2/', 'https://login.brand.test/api/v2/'];
    const checked = checkClaims({ ...valid, aud }, NOW, domains);
    assert.equal(checked.clientId, 'client-1');
    assert.deepEqual([...checked.scopes], ['read:users', 'create:users']);
    assert.equal(checked.expiresAtMs, (NOW + 3600) * 1000);
    assert.equal(checked.issuerDomain, 'tenant.test');
    assert.equal(checked.audienceDomain, 'login.brand.test');
  });

  it('takes the client from the subject without azp, and no scope as none', () => {
    const { azp: _azp, scope: _scope, ...rest } = valid;
    const checked = checkClaims(rest, NOW, domains);
    assert.equal(checked.clientId, 'client-1');
    assert.equal(checked.scopes.size, 0);
  });

  it('refuses an expired token, at its expiry second too', () => {
    assert.throws(
      () => checkClaims({ ...valid, exp: NOW }, NOW, domains),
      refusedWith('Expired token received for JSON Web Token validation'),
    );
  });

  it('refuses a token without a numeric exp or a string sub as invalid', () => {
    assert.throws(() => checkClaims({ ...valid, exp: undefined }, NOW, domains), refusedWith('Invalid token'));
    assert.throws(() => checkClaims({ ...valid, sub: undefined }, NOW, domains), refusedWith('Invalid token'));
  });

  it('refuses a token not valid yet, or with a non-numeric nbf', () => {
    const notYet = refusedWith('Token not yet valid (nbf) received for JSON Web Token validation');
    assert.throws(() => checkClaims({ ...valid, nbf: NOW + 1 }, NOW, domains), notYet);
    assert.throws(() => checkClaims({ ...valid, nbf: 'soon' as unknown as number }, NOW, domains), notYet);
    assert.doesNotThrow(() => checkClaims({ ...valid, nbf: NOW }, NOW, domains));
  });

  it('refuses an issuer or audience outside the tenant, checking the issuer first', () => {
    assert.throws(
      () => checkClaims({ ...valid, iss: 'https://other.test/' }, NOW, domains),
      refusedWith('Bad issuer: https://other.test/'),
    );
    assert.throws(
      () => checkClaims({ ...valid, iss: 'https://other.test/', aud: 'x' }, NOW, domains),
      refusedWith('Bad issuer: https://other.test/'),
    );
    const aud = ['https://other.test/api/v2/', 'https://tenant.test/'];
    assert.throws(
      () => checkClaims({ ...valid, aud }, NOW, domains),
      refusedWith('Bad audience: https://other.test/api/v2/ https://tenant.test/'),
    );
  });

  it('reads domains out of issuers and audiences only in their exact shape', () => {
    assert.equal(domainOfIssuer('https://tenant.test/'), 'tenant.test');
    assert.equal(domainOfIssuer('http://tenant.test/'), undefined);
    assert.equal(domainOfIssuer('https:///'), undefined);
    assert.equal(domainOfAudience('https://tenant.test/api/v2/'), 'tenant.test');
    assert.equal(domainOfAudience('https://tenant.test/api/v2'), undefined);
    assert.equal(domainOfAudience(42), undefined);
  });
});
