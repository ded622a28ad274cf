import { randomBytes } from 'node:crypto';
import { newId } from '../../ids.ts';
import type { SecretBox } from '../../secret-box.ts';
import type { SigningSecret } from './schema.ts';

/**
 * Standard Webhooks signing secrets of a stream (https://www.standardwebhooks.com). A stream has
 * none (unsigned), one, or during a rotation two: the newest, which never expires, and the previous
 * one, which keeps signing until its `expires_at` so receivers can switch over without a gap.
 */
export interface StoredSigningSecret extends SigningSecret {
  /** `whsec_` + base64 of 32 random bytes: the form Standard Webhooks libraries take. */
  secret: string;
}

const PREFIX = 'whsec_';

export function newSigningSecret(at: string): StoredSigningSecret {
  return { id: newId.signingSecret(), secret: `${PREFIX}${randomBytes(32).toString('base64')}`, created_at: at };
}

/** Standard Webhooks' bounds on a secret's key: 24 to 64 bytes. */
const MIN_KEY_BYTES = 24;
const MAX_KEY_BYTES = 64;

/** `whsec_` and canonical base64 (its length is checked by `signingSecretProblem`). */
const SIGNING_SECRET_PATTERN = '^whsec_(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$';

/**
 * Why `secret` cannot sign deliveries, or undefined: it must be what Standard Webhooks libraries take,
 * `whsec_` and the base64 of a 24 to 64 byte key (the secrets this server issues have 32).
 */
export function signingSecretProblem(secret: string): string | undefined {
  const form = 'must be whsec_ and the base64 of a 24 to 64 byte key (Standard Webhooks)';
  if (!new RegExp(SIGNING_SECRET_PATTERN).test(secret)) return form;
  const bytes = Buffer.from(secret.slice(PREFIX.length), 'base64').length;
  return bytes < MIN_KEY_BYTES || bytes > MAX_KEY_BYTES ? `${form}, got ${bytes} bytes` : undefined;
}

/** The HMAC key of a secret: the base64-decoded part after `whsec_`. */
export const signingKey = (stored: StoredSigningSecret): Buffer =>
  Buffer.from(stored.secret.slice(PREFIX.length), 'base64');

/** The secrets still signing at `at`, newest first. */
export function live(secrets: readonly StoredSigningSecret[], at: string): StoredSigningSecret[] {
  return secrets.filter((s) => s.expires_at === undefined || s.expires_at > at);
}

/**
 * After a rotation: the fresh secret first; the one it replaces keeps signing until `overlapSeconds`
 * from now (not at all when 0); any older one goes, so two secrets at most sign at once.
 */
export function rotate(
  secrets: readonly StoredSigningSecret[],
  fresh: StoredSigningSecret,
  at: string,
  overlapSeconds: number,
): StoredSigningSecret[] {
  const [current] = live(secrets, at);
  if (current === undefined || overlapSeconds === 0) return [fresh];
  const expires = new Date(Date.parse(at) + overlapSeconds * 1000).toISOString();
  const until = current.expires_at !== undefined && current.expires_at < expires ? current.expires_at : expires;
  return [fresh, { ...current, expires_at: until }];
}

/** Without one secret; the newest left becomes the current one again and stops expiring. */
export function without(secrets: readonly StoredSigningSecret[], id: string): StoredSigningSecret[] {
  const [first, ...rest] = secrets.filter((s) => s.id !== id);
  if (first === undefined) return [];
  const { expires_at: _dropped, ...current } = first;
  return [current, ...rest];
}

/** What the API shows of a secret: never the secret itself. */
export function withoutSecret({ id, created_at, expires_at }: StoredSigningSecret): SigningSecret {
  return { id, created_at, ...(expires_at === undefined ? {} : { expires_at }) };
}

/** A stream's stored signing secrets, newest first, expired ones included (see `live`); none: unsigned. */
export function openSigningSecrets(secretBox: SecretBox, sealed: string | null): StoredSigningSecret[] {
  return sealed === null ? [] : (JSON.parse(secretBox.open(sealed)) as StoredSigningSecret[]);
}

/** How a stream stores its signing secrets: sealed JSON, or null when there are none (unsigned). */
export function sealSigningSecrets(secretBox: SecretBox, secrets: readonly StoredSigningSecret[]): string | null {
  return secrets.length === 0 ? null : secretBox.seal(JSON.stringify(secrets));
}
