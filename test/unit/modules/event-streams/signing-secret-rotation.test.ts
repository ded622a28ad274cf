import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  live,
  newSigningSecret,
  openSigningSecrets,
  rotate,
  sealSigningSecrets,
  signingKey,
  without,
  withoutSecret,
  type StoredSigningSecret,
} from '../../../../src/modules/event-streams/signing-secret-rotation.ts';
import { SecretBox } from '../../../../src/secret-box.ts';

const AT = '2025-03-01T12:00:00.000Z';
const after = (seconds: number) => new Date(Date.parse(AT) + seconds * 1000).toISOString();
const secret = (id: string, expires_at?: string): StoredSigningSecret => ({
  id,
  secret: 'whsec_AAAA',
  created_at: AT,
  ...(expires_at === undefined ? {} : { expires_at }),
});

describe('rotating the signing secrets of a stream', () => {
  it('makes secrets Standard Webhooks libraries take: whsec_ and 32 random bytes in base64', () => {
    const fresh = newSigningSecret(AT);
    assert.match(fresh.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(signingKey(fresh).length, 32);
    assert.notEqual(newSigningSecret(AT).secret, fresh.secret);
  });

  it('a first secret, or a rotation without overlap, leaves the fresh one alone', () => {
    assert.deepEqual(rotate([], secret('new'), AT, 3600), [secret('new')]);
    assert.deepEqual(rotate([secret('old')], secret('new'), AT, 0), [secret('new')]);
  });

  it('the replaced secret signs on for the overlap, never longer than it was going to, and older ones go', () => {
    assert.deepEqual(rotate([secret('old')], secret('new'), AT, 3600), [secret('new'), secret('old', after(3600))]);
    assert.deepEqual(rotate([secret('b'), secret('a', after(60))], secret('c'), AT, 3600), [
      secret('c'),
      secret('b', after(3600)),
    ]);
    assert.deepEqual(rotate([secret('old', after(60))], secret('new'), AT, 3600), [
      secret('new'),
      secret('old', after(60)),
    ]);
  });

  it('signs only with secrets not expired yet', () => {
    assert.deepEqual(live([secret('b'), secret('a', AT)], AT), [secret('b')]);
    assert.deepEqual(live([secret('b'), secret('a', after(1))], AT), [secret('b'), secret('a', after(1))]);
  });

  it('removing the current secret makes the one left current again, without expiry', () => {
    assert.deepEqual(without([secret('b'), secret('a', after(60))], 'b'), [secret('a')]);
    assert.deepEqual(without([secret('a')], 'a'), []);
  });

  it('never shows the secret itself', () => {
    assert.deepEqual(withoutSecret(secret('a', after(60))), { id: 'a', created_at: AT, expires_at: after(60) });
  });

  it('stores the list sealed, and no secrets as null (unsigned)', () => {
    const box = SecretBox.fromKey('11'.repeat(32));
    const secrets = [secret('b'), secret('a', after(60))];
    const sealed = sealSigningSecrets(box, secrets);
    assert.ok(sealed !== null && !sealed.includes('whsec_'));
    assert.deepEqual(openSigningSecrets(box, sealed), secrets);
    assert.equal(sealSigningSecrets(box, []), null);
    assert.deepEqual(openSigningSecrets(box, null), []);
  });
});
