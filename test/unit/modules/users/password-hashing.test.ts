import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PasswordHashing } from '../../../../src/modules/users/password-hashing.ts';
import { hashPassword } from '../../../../src/modules/users/password.ts';

/** A hash function the test finishes by hand: each call is recorded with its password and its end. */
function heldHashes() {
  const calls: Array<{ password: string; finish: () => void }> = [];
  const hash = (password: string) =>
    new Promise<string>((resolve) => calls.push({ password, finish: () => resolve(`hash of ${password}`) }));
  return { calls, hash };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('password hashing shared between tenants', () => {
  it("runs at most two of a tenant's hashes at once, the rest in order, and another tenant's at once", async () => {
    const { calls, hash } = heldHashes();
    const hashing = new PasswordHashing(hash, 2);
    const flood = ['a1', 'a2', 'a3', 'a4', 'a5'].map((p) => hashing.hashFor('tenant-a', p));
    await settle();
    assert.deepEqual(
      calls.map((c) => c.password),
      ['a1', 'a2'],
    );
    // Another tenant's hash starts beside them, not after the flood (first come, first served queued it last).
    const other = hashing.hashFor('tenant-b', 'b1');
    await settle();
    assert.deepEqual(
      calls.map((c) => c.password),
      ['a1', 'a2', 'b1'],
    );
    calls[2]!.finish();
    assert.equal(await other, 'hash of b1');
    // Each one of the tenant's that ends lets its next start, in the order they came.
    calls[0]!.finish();
    await settle();
    assert.deepEqual(
      calls.map((c) => c.password),
      ['a1', 'a2', 'b1', 'a3'],
    );
    for (let i = 0; i < 5; i++) {
      for (const call of calls) call.finish();
      await settle();
    }
    assert.deepEqual(
      await Promise.all(flood),
      ['a1', 'a2', 'a3', 'a4', 'a5'].map((p) => `hash of ${p}`),
    );
    assert.equal(calls.length, 6);
  });

  it('lets the next hash run when one fails, and hashes with scrypt by default', async () => {
    let fail = true;
    const hashing = new PasswordHashing(async (password) => {
      if (fail) {
        fail = false;
        throw new Error('scrypt failed');
      }
      return password;
    }, 1);
    await assert.rejects(hashing.hashFor('t', 'x'), /scrypt failed/);
    assert.equal(await hashing.hashFor('t', 'y'), 'y');
    const hashed = await new PasswordHashing().hashFor('t', 'correct horse');
    assert.match(hashed, /^scrypt\$16384\$8\$1\$/);
    assert.notEqual(hashed, await hashPassword('correct horse'));
  });
});
