import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiError } from '../../../../src/http/errors.ts';
import { requireEmail } from '../../../../src/modules/email-verification/recipient.ts';

describe('requireEmail', () => {
  it('gives the user’s email, and refuses a user without one with a 400', () => {
    assert.equal(requireEmail({ user_id: 'svc|1', email: 'a@example.com' }), 'a@example.com');
    assert.throws(
      () => requireEmail({ user_id: 'svc|1', phone_number: '+15555550100' }),
      (error) =>
        error instanceof ApiError &&
        error.statusCode === 400 &&
        error.message === 'The user does not have an email address.',
    );
  });
});
