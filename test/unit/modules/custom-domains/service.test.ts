import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  checkRelyingParty,
  checkTypeMembers,
  mergeMetadata,
  parseDomainQuery,
} from '../../../../src/modules/custom-domains/service.ts';

const refusal = (message: string) => (error: unknown) => {
  assert.equal((error as { statusCode?: number }).statusCode, 400);
  assert.equal((error as Error).message, message);
  return true;
};

describe('custom domain members', () => {
  it('accepts the domain itself or a suffix of at least two labels as relying party identifier', () => {
    for (const rpi of [undefined, null, 'login.example.com', 'EXAMPLE.com']) {
      assert.doesNotThrow(() => checkRelyingParty('login.example.com', rpi));
    }
    const wrong = refusal(
      "The 'relying_party_identifier' must be equal to or a registrable domain suffix of the domain.",
    );
    for (const rpi of ['com', 'other.com', 'ogin.example.com', 'xlogin.example.com']) {
      assert.throws(() => checkRelyingParty('login.example.com', rpi), wrong, rpi);
    }
  });

  it('keeps tls_policy to svc-managed domains and custom_client_ip_header to self-managed ones', () => {
    assert.doesNotThrow(() => checkTypeMembers('svc_managed_certs', { tls_policy: 'recommended' }));
    assert.doesNotThrow(() => checkTypeMembers('self_managed_certs', { custom_client_ip_header: null }));
    assert.throws(
      () => checkTypeMembers('self_managed_certs', { tls_policy: 'recommended' }),
      refusal("The 'tls_policy' cannot be set on self_managed domains"),
    );
    assert.throws(
      () => checkTypeMembers('svc_managed_certs', { custom_client_ip_header: 'x-forwarded-for' }),
      refusal("The 'custom_client_ip_header' cannot be set on svc_managed domains"),
    );
  });

  it('merges metadata, null deleting a key, and refuses more than ten keys', () => {
    assert.equal(mergeMetadata('{"a":"1","b":"2"}', { b: null, c: '3' }), '{"a":"1","c":"3"}');
    assert.equal(mergeMetadata(null, { a: null }), '{}');
    const ten = JSON.stringify(Object.fromEntries([...Array(10).keys()].map((i) => [`k${i}`, 'v'])));
    assert.throws(
      () => mergeMetadata(ten, { extra: 'v' }),
      refusal(
        "Payload validation error: 'Too many properties defined (11), must be at most 10' on property domain_metadata.",
      ),
    );
    assert.doesNotThrow(() => mergeMetadata(ten, { extra: 'v', k0: null }), 'deletions count first');
  });
});

describe('the q query of a list', () => {
  it('takes domain:<value> and domain:<prefix>*, lower-cased', () => {
    assert.deepEqual(parseDomainQuery('domain:Login.Example.com'), { value: 'login.example.com', prefix: false });
    assert.deepEqual(parseDomainQuery(' domain:"login*" '), { value: 'login', prefix: true });
  });

  it('refuses anything else, LIKE wildcards included', () => {
    for (const q of ['name:x', 'domain:lo%gin', 'domain:a_b', 'domain:a*b']) {
      assert.throws(
        () => parseDomainQuery(q),
        (error: unknown) => {
          assert.equal((error as { statusCode?: number; errorCode?: string }).errorCode, 'invalid_query_string');
          return true;
        },
        q,
      );
    }
  });
});
