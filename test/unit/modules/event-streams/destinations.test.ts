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

  it('keeps the stored secret when left out only for the same method and the same endpoint', () => {
    const current = stored(bearer('https://hooks.example/a', 'tok'));
    // Other spellings of the same target: host case, default port, dot segments, userinfo and fragment (never sent).
    for (const same of ['https://HOOKS.example:443/a', 'https://hooks.example/b/../a', 'https://u@hooks.example/a#x']) {
      assert.equal(development.seal(bearer(same), current).secret, current.secret, same);
    }
    for (const other of ['https://other.example/a', 'https://hooks.example/b', 'https://hooks.example/a?x=1']) {
      assert.throws(
        () => development.seal(bearer(other), current),
        refusal(/stored token is only sent to the webhook_endpoint it was given for; send it again to change/),
        other,
      );
    }
    assert.throws(
      () =>
        development.seal({ endpoint: 'https://hooks.example/a', auth: { method: 'basic', username: 'u' } }, current),
      refusal(/^Payload validation error: 'Missing required property: password'/),
    );
  });

  it('refuses a header secret that no HTTP header may carry, without echoing it', () => {
    const custom = (header_value: string): CheckedWebhook => ({
      endpoint: 'https://hooks.example/a',
      auth: { method: 'custom_header', header_key: 'x-secret', header_value },
    });
    const cases: Array<[CheckedWebhook, string, string]> = [
      [bearer('https://hooks.example/a', 'secret1\r\nX-Injected: 1'), 'token', 'secret1'],
      [bearer('https://hooks.example/a', 'secret2\n'), 'token', 'secret2'],
      [custom('secret3\u0000'), 'header_value', 'secret3'],
      [custom('secret4\u0007'), 'header_value', 'secret4'],
      [custom('secret5\u2603'), 'header_value', 'secret5'],
    ];
    for (const [webhook, name, secret] of cases) {
      assert.throws(
        () => development.seal(webhook, undefined),
        (error: ApiError) =>
          refusal(new RegExp(`${name} may hold only characters allowed in an HTTP header value`))(error) &&
          !error.message.includes(secret),
      );
    }
    // Tab, space, visible ASCII and Latin-1 are a header value's characters; a basic password is sent encoded.
    assert.equal(openSecret(box, development.seal(custom('a\tb c~\u00e9'), undefined).secret), 'a\tb c~\u00e9');
    const basic = {
      endpoint: 'https://hooks.example/a',
      auth: { method: 'basic', username: 'u', password: 'p\r\n\u2603' },
    };
    assert.equal(openSecret(box, development.seal(basic as CheckedWebhook, undefined).secret), 'p\r\n\u2603');
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
