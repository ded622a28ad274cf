import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { hashPassword, isTooWeak, MIN_PASSWORD_LENGTH } from '../../../../src/modules/users/password.ts';

describe('password rule', () => {
  it('refuses passwords shorter than eight characters, and only those', () => {
    assert.equal(MIN_PASSWORD_LENGTH, 8);
    assert.equal(isTooWeak(''), true);
    assert.equal(isTooWeak('1234567'), true);
    assert.equal(isTooWeak('12345678'), false);
    assert.equal(isTooWeak('correct horse battery'), false);
  });

  it('hashes with scrypt and a fresh salt: equal passwords never share a hash, the password never shows', async () => {
    const [a, b] = await Promise.all([hashPassword('correct horse battery'), hashPassword('correct horse battery')]);
    assert.match(a, /^scrypt\$16384\$8\$1\$[\w-]{22}\$[\w-]{43}$/);
    assert.notEqual(a, b);
    assert.ok(!a.includes('correct horse battery'));
  });
});
