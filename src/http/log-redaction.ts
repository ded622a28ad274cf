import { BoundedCache } from '../bounded-cache.ts';

/** What replaces a secret in a log line, as the logger's own redaction writes it. */
export const CENSOR = '[redacted]';

/** Query parameters whose values are credentials, by name (lower-cased, exact). */
const SECRET_NAMES = new Set([
  'ticket',
  'code',
  'code_verifier',
  'otp',
  'key',
  'sig',
  'signature',
  'auth',
  'authorization',
  'client_assertion',
  'assertion',
  'jwt',
  'session',
  'credential',
  'credentials',
  'pass',
  'passwd',
  'pwd',
]);
/** …and by ending: `token`, `access_token`, `sessionToken`, `client_secret`, `password`, `x-api-key`, `cname_api_key`. */
const SECRET_ENDINGS = /(?:token|secret|password|api[-_]?key|session|session_id|token_hint|authorization)$/;

/**
 * Verdicts already reached, by name as written: every logged request asks again about the same few
 * header and parameter names. Bounded, since the names are the client's to choose.
 */
const verdicts = new BoundedCache<boolean>({ entries: 1000, bytes: 256 * 1024 });

function isSecretName(raw: string): boolean {
  const known = verdicts.get(raw);
  if (known !== undefined) return known;
  const secret = judgeName(raw);
  verdicts.set(raw, secret);
  return secret;
}

function judgeName(raw: string): boolean {
  let name = raw;
  if (name.includes('%') || name.includes('+')) {
    try {
      name = decodeURIComponent(name.replace(/\+/g, ' '));
    } catch {
      // A malformed escape: judged as written.
    }
  }
  // As parsers read it: `ticket[]`, `token.`, `ticket ` and `x_token<NUL>` are still those names. Cut
  // at the first bracket with indexOf: a pattern such as /\[.*$/ retried from every bracket took time
  // quadratic in a client's name (16,000 brackets and a decoded line break: 0.4 s an access line).
  const bracket = name.indexOf('[');
  name = (bracket === -1 ? name : name.slice(0, bracket)).toLowerCase().replace(/[^a-z0-9_-]+/g, '');
  return SECRET_NAMES.has(name) || SECRET_ENDINGS.test(name);
}

/**
 * A URL (a request's path and query, or an absolute webhook URL) fit for a log: the values of secret
 * query parameters and any user-info replaced by CENSOR, everything else as it was. It runs on every
 * logged request, so a URL without a query or user-info is returned as it is, untouched.
 */
export function redactUrl(url: string): string {
  const query = url.indexOf('?');
  const at = url.indexOf('@');
  if (query === -1 && at === -1) return url;
  let redacted = url;
  if (at !== -1) redacted = redacted.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#@]*@/i, `$1${CENSOR}@`);
  const start = redacted.indexOf('?');
  if (start === -1) return redacted;
  // The fragment is read as query too: a request target has none, so anything after `#` is the client's doing.
  const pairs = redacted
    .slice(start + 1)
    .split(/([&;#])/)
    .map((pair) => {
      const equals = pair.indexOf('=');
      return equals !== -1 && isSecretName(pair.slice(0, equals)) ? `${pair.slice(0, equals)}=${CENSOR}` : pair;
    });
  return `${redacted.slice(0, start + 1)}${pairs.join('')}`;
}

/**
 * Request headers fit for a log: those named like credentials (`authorization`, `proxy-authorization`,
 * `x-api-key`, `x-session-token`…) and cookies replaced, a Referer redacted as a URL. The access log
 * writes what this returns as is: nothing it keeps may be a credential.
 */
export function redactHeaders(headers: Record<string, unknown>): Record<string, unknown> {
  const redacted: Record<string, unknown> = {};
  for (const name of Object.keys(headers))
    redacted[name] = name === 'cookie' || isSecretName(name) ? CENSOR : headers[name];
  if (typeof redacted.referer === 'string') redacted.referer = redactUrl(redacted.referer);
  return redacted;
}
