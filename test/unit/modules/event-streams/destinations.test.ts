import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EndpointGuard } from '../../../../src/modules/event-streams/delivery/endpoint-guard.ts';
import { Destinations, openSecret, type CheckedWebhook } from '../../../../src/modules/event-streams/destinations.ts';
import type { Destination } from '../../../../src/modules/event-streams/schema.ts';
import type { ApiError } from '../../../../src/http/errors.ts';
import { SecretBox } from '../../../../src/secret-box.ts';

const box = SecretBox.fromKey('22'.repeat(32));
const development = new Destinations(box, undefined);
const bearer = (endpoint: string, token?: string): CheckedWebhook => ({
  endpoint,
  auth: { method: 'bearer', ...(token === undefined ? {} : { token }) },
});
/** What a stored stream keeps of its destination. */
const stored = (webhook: CheckedWebhook) => {
  const sealed = development.seal(webhook, undefined);
  return { destination: JSON.stringify(sealed.destination), secret: sealed.secret };
};
const refusal = (message: RegExp) => (error: ApiError) => error.statusCode === 400 && message.test(error.message);

describe("a stream's destination", () => {
  it('keeps the secret sealed, out of what the API shows', () => {
    const sealed = development.seal(bearer('https://hooks.example/a', 'tok'), undefined);
    assert.deepEqual(sealed.destination, {
      type: 'webhook',
      configuration: { webhook_endpoint: 'https://hooks.example/a', webhook_authorization: { method: 'bearer' } },
    });
    assert.equal(openSecret(box, sealed.secret), 'tok');
    assert.equal(openSecret(box, null), undefined);
  });

  it('keeps the stored secret when left out only for the same method and the same origin', () => {
    const current = stored(bearer('https://hooks.example/a', 'tok'));
    assert.equal(development.seal(bearer('https://HOOKS.example:443/b'), current).secret, current.secret);
    assert.throws(
      () => development.seal(bearer('https://other.example/a'), current),
      refusal(/stored token is only sent to the origin it was given for \(https:\/\/hooks\.example\); send it again/),
    );
    assert.throws(
      () =>
        development.seal({ endpoint: 'https://hooks.example/a', auth: { method: 'basic', username: 'u' } }, current),
      refusal(/^Payload validation error: 'Missing required property: password'/),
    );
  });

  it('refuses a custom header the sender sets itself or that steers the connection', () => {
    for (const header_key of ['Webhook-Signature', 'host', 'Proxy-Authorization']) {
      assert.throws(
        () =>
          development.seal(
            { endpoint: 'https://hooks.example/a', auth: { method: 'custom_header', header_key, header_value: 'v' } },
            undefined,
          ),
        refusal(/is set by the server itself and cannot carry the secret/),
      );
    }
  });

  it('accepts webhooks only, https:// only outside development mode', async () => {
    const destination = (type: string, endpoint: string) =>
      ({
        type,
        configuration: { webhook_endpoint: endpoint, webhook_authorization: { method: 'bearer', token: 't' } },
      }) as Destination;
    await assert.rejects(
      development.check(destination('eventbridge', 'https://hooks.example/a')),
      (error: ApiError) => error.statusCode === 400 && error.errorCode === 'operation_not_supported',
    );
    await development.check(destination('webhook', 'http://127.0.0.1/hook'));
    await assert.rejects(
      development.check(destination('webhook', 'ftp://hooks.example/a')),
      refusal(/does not match pattern/),
    );
    // Allow-listed by name: no DNS server is asked.
    const guarded = new Destinations(box, new EndpointGuard({ allowedHosts: ['hooks.example'], dnsServers: [] }));
    await guarded.check(destination('webhook', 'https://hooks.example/a'));
    await assert.rejects(
      guarded.check(destination('webhook', 'http://hooks.example/a')),
      refusal(/does not match pattern \^https/),
    );
  });
});
