import { badRequest, eventStreamErrors } from '../../http/errors.ts';
import { reasons } from '../../http/validation.ts';
import type { SecretBox } from '../../secret-box.ts';
import { EndpointRefused, EndpointUnresolved, type EndpointGuard } from './delivery/endpoint-guard.ts';
import type { Authorization, Destination } from './schema.ts';

/** A stream's destination as the API shows it: never the secret. */
export interface PublicDestination {
  type: 'webhook';
  configuration: { webhook_endpoint: string; webhook_authorization: Record<string, string> };
}

/** A webhook destination that passed every check needing no stored stream. */
export interface CheckedWebhook {
  endpoint: string;
  auth: Authorization;
}

/** A destination ready to store: its public JSON, and its secret sealed with the SecretBox. */
export interface SealedDestination {
  destination: PublicDestination;
  secret: string | null;
}

/**
 * Headers the sender sets itself, or that steer the connection: a custom authorization header may not
 * replace them (a forged `webhook-signature`, a `host` aimed at another virtual host, a broken framing).
 */
const RESERVED_HEADERS = new Set([
  'host',
  'content-type',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'expect',
  'user-agent',
  'webhook-id',
  'webhook-timestamp',
  'webhook-signature',
]);

/**
 * Where a request to the endpoint goes, as WHATWG URL (and so the sender) reads it: scheme, host, port,
 * path and query — host lower-cased, default port and dot segments dropped — without the userinfo and
 * fragment, which are never sent. A trailing dot makes another host; another path or query is another
 * target, since one host often serves many receivers by path (hooks.slack.com/services/…,
 * hooks.zapier.com/hooks/catch/…).
 */
function targetOf(endpoint: string): string {
  const url = new URL(endpoint);
  url.username = '';
  url.password = '';
  url.hash = '';
  return url.href;
}

/**
 * What a secret sent as a header value may hold: tab, visible ASCII, space and Latin-1 (RFC 9110's
 * field-value, as the sender checks it). CR or LF would be refused at every delivery, never here.
 */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** The webhook's secret (token, password or header_value) opened: for the delivery worker only. */
export function openSecret(secretBox: SecretBox, sealed: string | null): string | undefined {
  return sealed === null ? undefined : secretBox.open(sealed);
}

/**
 * The rules of a stream's destination: what may be saved, and how its secret is kept.
 * `guard` undefined: development mode (DELIVERY_ALLOW_HTTP), where endpoints may be http:// and at any address.
 */
export class Destinations {
  constructor(
    private readonly secretBox: SecretBox,
    private readonly guard: EndpointGuard | undefined,
  ) {}

  /** A stored destination's secret (token, password or header_value), opened: for seed export only. */
  open(sealed: string | null): string | undefined {
    return openSecret(this.secretBox, sealed);
  }

  /**
   * Everything about a destination that needs no stored stream, DNS included: run before any
   * transaction opens, so a slow resolver never holds a lock.
   */
  async check(input: Destination): Promise<CheckedWebhook> {
    if (input.type !== 'webhook') throw eventStreamErrors.destinationNotSupported(input.type);
    const { webhook_endpoint: endpoint, webhook_authorization: auth } = input.configuration;
    if (endpoint === undefined) {
      throw badRequest.missingProperty('webhook_endpoint', 'destination.configuration');
    }
    if (auth === undefined) {
      throw badRequest.missingProperty('webhook_authorization', 'destination.configuration');
    }
    await this.checkEndpoint(endpoint);
    return { endpoint, auth };
  }

  /**
   * The stored secret is kept when the PATCH leaves it out only while it would still go where it was
   * given: the same method and the same endpoint (see targetOf). Anyone allowed to update a stream must
   * not be able to send its secret to an address of their choosing, another path of the same host
   * included, without knowing it.
   */
  seal(
    { endpoint, auth }: CheckedWebhook,
    current: { destination: string; secret: string | null } | undefined,
  ): SealedDestination {
    const stored = current ? (JSON.parse(current.destination) as PublicDestination).configuration : undefined;
    const kept = stored?.webhook_authorization.method === auth.method && current?.secret ? current.secret : null;
    const missing = (name: string, why?: string) =>
      badRequest.missingProperty(name, 'destination.configuration.webhook_authorization', why);
    const sealed = (secret: string | undefined, name: string, header = true): string => {
      if (secret !== undefined) {
        // The value is not echoed: error messages are logged.
        if (header && !HEADER_VALUE.test(secret)) {
          throw badRequest.payload(
            `${name} may hold only characters allowed in an HTTP header value (no CR, LF or other control characters)`,
            'destination.configuration.webhook_authorization',
          );
        }
        return this.secretBox.seal(secret);
      }
      if (kept === null) throw missing(name);
      if (targetOf(stored!.webhook_endpoint) === targetOf(endpoint)) return kept;
      // No endpoint in the message: a path may itself be a credential.
      throw missing(
        name,
        `the stored ${name} is only sent to the webhook_endpoint it was given for; send it again to change webhook_endpoint`,
      );
    };
    let publicAuth: Record<string, string>;
    let secret: string;
    switch (auth.method) {
      case 'bearer':
        publicAuth = { method: 'bearer' };
        secret = sealed(auth.token, 'token');
        break;
      case 'basic':
        if (auth.username === undefined) throw missing('username');
        publicAuth = { method: 'basic', username: auth.username };
        secret = sealed(auth.password, 'password', false);
        break;
      case 'custom_header':
        if (auth.header_key === undefined) throw missing('header_key');
        if (RESERVED_HEADERS.has(auth.header_key.toLowerCase()) || auth.header_key.toLowerCase().startsWith('proxy-')) {
          throw badRequest.payload(
            `header_key ${auth.header_key} is set by the server itself and cannot carry the secret`,
            'destination.configuration.webhook_authorization',
          );
        }
        publicAuth = { method: 'custom_header', header_key: auth.header_key };
        secret = sealed(auth.header_value, 'header_value');
        break;
    }
    return {
      destination: {
        type: 'webhook',
        configuration: { webhook_endpoint: endpoint, webhook_authorization: publicAuth },
      },
      secret,
    };
  }

  /** https:// only, at public addresses or allow-listed ones (see EndpointGuard); anything in development mode. */
  private async checkEndpoint(endpoint: string): Promise<void> {
    const refuse = (reason: string) =>
      badRequest.payload(reason, 'destination.configuration.webhook_endpoint', 'URL of the webhook');
    const pattern = () => refuse(reasons.pattern('^https://.*', endpoint));
    let url: URL;
    try {
      url = new URL(endpoint);
    } catch {
      throw pattern();
    }
    const { guard } = this;
    if (guard === undefined) {
      if (url.protocol !== 'https:' && url.protocol !== 'http:') throw pattern();
      return;
    }
    if (url.protocol !== 'https:') throw pattern();
    try {
      await guard.check(url.hostname);
    } catch (error) {
      if (error instanceof EndpointRefused) throw refuse(`Webhook endpoints must be public: ${error.message}`);
      if (error instanceof EndpointUnresolved) throw refuse(`Webhook endpoint ${error.message}`);
      throw error;
    }
  }
}
