import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiError } from '../../../../src/http/errors.ts';
import type { EmailDomain } from '../../../../src/modules/custom-domains/service.ts';
import { chooseDomainContext, requestedDomain } from '../../../../src/modules/email-verification/domain-context.ts';

const CANONICAL = { domain: 'acme.tenantry.test', domain_metadata: {} };
const domain = (name: string, status: EmailDomain['status'], isDefault = false): EmailDomain => ({
  domain: name,
  status,
  domain_metadata: { brand: name },
  is_default: isDefault,
});
const refusal = (statusCode: number, errorCode: string) => (error: unknown) =>
  error instanceof ApiError && error.statusCode === statusCode && error.errorCode === errorCode;

describe('requestedDomain', () => {
  it('reads either header, lower-cased, and refuses two that disagree', () => {
    assert.equal(requestedDomain({}), undefined);
    assert.equal(requestedDomain({ 'svc-custom-domain': 'Login.Acme.com' }), 'login.acme.com');
    assert.equal(requestedDomain({ 'auth0-custom-domain': 'login.acme.com' }), 'login.acme.com');
    assert.equal(
      requestedDomain({ 'svc-custom-domain': 'LOGIN.acme.com', 'auth0-custom-domain': 'login.ACME.com' }),
      'login.acme.com',
    );
    assert.throws(
      () => requestedDomain({ 'svc-custom-domain': 'a.acme.com', 'auth0-custom-domain': 'b.acme.com' }),
      refusal(400, 'invalid_headers'),
    );
  });
});

describe('chooseDomainContext', () => {
  it('takes the ready custom domain the header names, with its metadata; anything else is a 400', () => {
    const records = [domain('login.acme.com', 'ready'), domain('pending.acme.com', 'pending_verification')];
    assert.deepEqual(chooseDomainContext(CANONICAL, 'login.acme.com', records), {
      domain: 'login.acme.com',
      domain_metadata: { brand: 'login.acme.com' },
    });
    assert.throws(
      () => chooseDomainContext(CANONICAL, 'pending.acme.com', records),
      refusal(400, 'inexistent_custom_domain'),
    );
    assert.throws(
      () => chooseDomainContext(CANONICAL, 'other.example.com', records),
      refusal(400, 'inexistent_custom_domain'),
    );
  });

  it('without the header: the ready default domain, or the canonical one when no custom domain is the default', () => {
    assert.equal(
      chooseDomainContext(CANONICAL, undefined, [domain('a.acme.com', 'ready'), domain('b.acme.com', 'ready', true)])
        .domain,
      'b.acme.com',
    );
    assert.equal(chooseDomainContext(CANONICAL, undefined, [domain('a.acme.com', 'ready')]), CANONICAL);
    assert.equal(chooseDomainContext(CANONICAL, undefined, []), CANONICAL);
  });

  it('a default no longer ready gives way to the only ready domain; several are a 409; none leaves the canonical', () => {
    const stale = domain('old.acme.com', 'pending_verification', true);
    assert.equal(
      chooseDomainContext(CANONICAL, undefined, [stale, domain('a.acme.com', 'ready')]).domain,
      'a.acme.com',
    );
    assert.throws(
      () =>
        chooseDomainContext(CANONICAL, undefined, [
          stale,
          domain('a.acme.com', 'ready'),
          domain('b.acme.com', 'ready'),
        ]),
      refusal(409, 'custom_domain_conflict'),
    );
    assert.equal(chooseDomainContext(CANONICAL, undefined, [stale]), CANONICAL);
  });
});
