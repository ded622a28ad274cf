import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { hashSecret } from '../../../../../src/secret-hash.ts';
import { newTicket, ticketState } from '../../../../../src/modules/email-verification/tickets/ticket.ts';

const AT = '2024-01-01T00:00:00.000Z';
const input = {
  tenantId: 't',
  userId: 'svc|1',
  email: 'a@example.com',
  domain: 'login.acme.com',
  resultUrl: undefined,
  ttlSeconds: undefined,
  includeEmailInRedirect: true,
};

describe('newTicket', () => {
  it('builds the link on the domain and stores only the hash of its secret', () => {
    const { url, record } = newTicket(input, AT, 'the-secret');
    assert.equal(url, 'https://login.acme.com/u/email-verification?ticket=the-secret');
    assert.equal(record.ticket_hash, hashSecret('the-secret'));
    assert.ok(!JSON.stringify(record).includes('the-secret'));
    assert.equal(record.result_url, null);
    assert.equal(record.include_email_in_redirect, 1);
    assert.equal(record.used_at, null);
  });

  it('lives five days when its lifetime is 0 or absent, and as long as asked otherwise', () => {
    assert.equal(newTicket(input, AT).record.expires_at, '2024-01-06T00:00:00.000Z');
    assert.equal(newTicket({ ...input, ttlSeconds: 0 }, AT).record.expires_at, '2024-01-06T00:00:00.000Z');
    assert.equal(newTicket({ ...input, ttlSeconds: 60 }, AT).record.expires_at, '2024-01-01T00:01:00.000Z');
  });

  it('carries 256 random bits per ticket', () => {
    const a = new URL(newTicket(input, AT).url).searchParams.get('ticket')!;
    const b = new URL(newTicket(input, AT).url).searchParams.get('ticket')!;
    assert.match(a, /^[\w-]{43}$/);
    assert.notEqual(a, b);
  });
});

describe('ticketState', () => {
  const expiresAt = '2024-01-02T00:00:00.000Z';
  it('is usable once, before it expires', () => {
    assert.equal(ticketState(undefined, AT), 'invalid');
    assert.equal(ticketState({ used_at: null, expires_at: expiresAt }, AT), 'usable');
    assert.equal(ticketState({ used_at: AT, expires_at: expiresAt }, AT), 'used');
    assert.equal(ticketState({ used_at: null, expires_at: expiresAt }, expiresAt), 'expired');
    assert.equal(
      ticketState({ used_at: AT, expires_at: AT }, expiresAt),
      'used',
      'a used ticket says so, even once expired',
    );
  });
});
