import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * Hashes of secrets the server hands out and keeps only the hash of: client secrets, cname-api-keys,
 * email-verification tickets. Each is at least 256 random bits, so a plain SHA-256 is as strong as a
 * slow password hash and costs a microsecond.
 */
export const hashSecret = (secret: string): string => createHash('sha256').update(secret).digest('hex');

/** Whether `secret` hashes to the stored `hash`, compared in constant time. */
export function secretMatches(hash: string, secret: string): boolean {
  const expected = Buffer.from(hash, 'hex');
  const given = Buffer.from(hashSecret(secret), 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}
