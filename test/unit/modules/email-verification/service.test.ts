import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defaultSender, wantsVerificationEmail } from '../../../../src/modules/email-verification/service.ts';

describe('wantsVerificationEmail', () => {
  it('follows verify_email when given, whatever email_verified says', () => {
    assert.equal(wantsVerificationEmail({ verify_email: true, email_verified: true }), true);
    assert.equal(wantsVerificationEmail({ verify_email: false, email_verified: false }), false);
  });

  it('without verify_email, sends one unless email_verified is true', () => {
    assert.equal(wantsVerificationEmail({}), true);
    assert.equal(wantsVerificationEmail({ email_verified: false }), true);
    assert.equal(wantsVerificationEmail({ email_verified: true }), false);
  });
});

describe('defaultSender', () => {
  it('is MAIL_FROM when set, otherwise no-reply@ the domain without its port', () => {
    assert.equal(defaultSender('Acme <mail@acme.com>', 'login.acme.com'), 'Acme <mail@acme.com>');
    assert.equal(defaultSender(undefined, 'login.acme.com'), 'no-reply@login.acme.com');
    assert.equal(defaultSender(undefined, 'localhost:8080'), 'no-reply@localhost');
  });
});
