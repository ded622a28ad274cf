import { createPrivateKey, createPublicKey, generateKeyPair, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import { now } from '../../db/database.ts';
import { newId } from '../../ids.ts';
import type { SecretBox } from '../../secret-box.ts';
import type { SigningKeyStatus, SigningKeyStore } from './store.ts';
import { BoundedCache } from '../../bounded-cache.ts';

const generateRsa = promisify(generateKeyPair);

export interface SigningKey {
  kid: string;
  privateKey: KeyObject;
}

export interface VerificationKeys {
  /** The published keys: a revoked key is absent, so a cached token is refused once its `kid` is gone. */
  byKid: Map<string, KeyObject>;
}

export interface PublicJwk {
  kty: string;
  kid: string;
  use: 'sig';
  alg: 'RS256';
  n: string;
  e: string;
}

/**
 * How long a cached read serves, counted from before the read: what another node changed reaches this
 * one within 5 s (the README's promise for revoked keys and deleted domains), however long the read took.
 */
const CACHE_MS = 5_000;

/** Keys held per tenant, for 10,000 tenants and 64 MiB at most; a 2048-bit key object is charged 4 KiB. */
const KEY_CACHE_BOUNDS = { entries: 10_000, bytes: 64 * 1024 * 1024 };
const KEY_OBJECT_BYTES = 4096;

/**
 * The tenant's RS256 signing keys. The private key is sealed at rest and never leaves this module;
 * the public half is published as JWKS. Rotation keeps the previous key verifiable until revoked,
 * so tokens already issued stay valid until they expire.
 */
export class SigningKeyService {
  private readonly signingCache = new BoundedCache<{ key: SigningKey; until: number }>(KEY_CACHE_BOUNDS);
  private readonly verifyCache = new BoundedCache<{ keys: VerificationKeys; until: number }>(KEY_CACHE_BOUNDS);
  /** Bumped by forget(): keys read while a change was under way are not cached, lest a rotated or revoked key outlive it. */
  private generation = 0;

  constructor(
    private readonly store: SigningKeyStore,
    private readonly secretBox: SecretBox,
  ) {}

  /** A key pair generated ahead of need (prepare()), taken by the next create(). */
  private spare: ReturnType<typeof generateRsa> | undefined;

  /**
   * Starts generating the key pair the next create() takes, on the thread pool: a server that is about
   * to create its first tenant (an in-memory one at each start) has it ready, instead of waiting
   * 50–500 ms for it after everything else.
   */
  prepare(): void {
    if (this.spare !== undefined) return;
    this.spare = generateRsa('rsa', { modulusLength: 2048 });
    // A failure is met by the create() that takes it.
    this.spare.catch(() => {});
  }

  async create(tenantId: string, status: Exclude<SigningKeyStatus, 'revoked'> = 'current'): Promise<string> {
    const pending = this.spare ?? generateRsa('rsa', { modulusLength: 2048 });
    this.spare = undefined;
    const { privateKey, publicKey } = await pending;
    const kid = newId.keyId();
    const jwk = publicKey.export({ format: 'jwk' });
    const publicJwk: PublicJwk = { kty: 'RSA', kid, use: 'sig', alg: 'RS256', n: String(jwk.n), e: String(jwk.e) };
    await this.store.insert({
      kid,
      tenant_id: tenantId,
      private_key: this.secretBox.seal(privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()),
      public_jwk: JSON.stringify(publicJwk),
      status,
      created_at: now(),
    });
    this.forget(tenantId);
    return kid;
  }

  /** Makes a new key current; the old current key becomes 'previous' and still verifies. */
  async rotate(tenantId: string): Promise<string> {
    const kid = await this.create(tenantId, 'previous');
    await this.store.makeCurrent(tenantId, kid);
    this.forget(tenantId);
    return kid;
  }

  /** Removes a key from JWKS: tokens it signed are refused from then on. */
  async revoke(tenantId: string, kid: string): Promise<boolean> {
    const revoked = await this.store.revokePrevious(tenantId, kid);
    this.forget(tenantId);
    return revoked;
  }

  async current(tenantId: string): Promise<SigningKey> {
    const cached = this.signingCache.get(tenantId);
    if (cached && cached.until > Date.now()) return cached.key;
    const generation = this.generation;
    const at = Date.now();
    const row = await this.store.current(tenantId);
    if (!row) throw new Error(`tenant ${tenantId} has no signing key`);
    const key = { kid: row.kid, privateKey: createPrivateKey(this.secretBox.open(row.private_key)) };
    if (generation === this.generation)
      this.signingCache.set(tenantId, { key, until: at + CACHE_MS }, KEY_OBJECT_BYTES);
    return key;
  }

  /** What verificationKeys() would answer from the cache alone; undefined when it would have to read. */
  verificationKeysCached(tenantId: string): VerificationKeys | undefined {
    const cached = this.verifyCache.get(tenantId);
    return cached && cached.until > Date.now() ? cached.keys : undefined;
  }

  async verificationKeys(tenantId: string): Promise<VerificationKeys> {
    const cached = this.verifyCache.get(tenantId);
    if (cached && cached.until > Date.now()) return cached.keys;
    const generation = this.generation;
    const at = Date.now();
    const jwks = await this.jwks(tenantId);
    const byKid = new Map(
      jwks.keys.map((jwk) => [jwk.kid, createPublicKey({ key: { kty: jwk.kty, n: jwk.n, e: jwk.e }, format: 'jwk' })]),
    );
    const keys = { byKid };
    if (generation === this.generation)
      this.verifyCache.set(tenantId, { keys, until: at + CACHE_MS }, byKid.size * KEY_OBJECT_BYTES);
    return keys;
  }

  async jwks(tenantId: string): Promise<{ keys: PublicJwk[] }> {
    const published = await this.store.published(tenantId);
    return { keys: published.map((jwk) => JSON.parse(jwk) as PublicJwk) };
  }

  /** Drops the cached keys of one tenant, or of all (after the database was restored from a snapshot). */
  forget(tenantId?: string): void {
    this.generation++;
    if (tenantId === undefined) {
      this.signingCache.clear();
      this.verifyCache.clear();
      return;
    }
    this.signingCache.delete(tenantId);
    this.verifyCache.delete(tenantId);
  }
}
