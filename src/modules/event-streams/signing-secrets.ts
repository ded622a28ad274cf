import type { Database } from '../../db/database.ts';
import { now, transaction } from '../../db/database.ts';
import { badRequest, eventStreamErrors } from '../../http/errors.ts';
import { newId } from '../../ids.ts';
import type { SecretBox } from '../../secret-box.ts';
import type { CreateSigningSecretBody, SigningSecretCreated, SigningSecretList } from './schema.ts';
import {
  live,
  newSigningSecret,
  openSigningSecrets,
  signingSecretProblem,
  rotate,
  sealSigningSecrets,
  without,
  withoutSecret,
} from './signing-secret-rotation.ts';
import type { StreamStore } from './store/streams.ts';
import { existingStream } from './streams.ts';

/** How long a replaced signing secret keeps signing when the rotation does not say. */
const DEFAULT_SIGNING_OVERLAP_SECONDS = 86_400;

/** A stream's Standard Webhooks signing secrets (a Tenantry extension): list, rotate in a new one, stop signing. */
export class SigningSecrets {
  constructor(
    private readonly database: Database,
    private readonly store: StreamStore,
    private readonly secretBox: SecretBox,
  ) {}

  async list(tenantId: string, streamId: string): Promise<SigningSecretList> {
    const row = await existingStream(this.store, tenantId, streamId);
    return { signing_secrets: live(openSigningSecrets(this.secretBox, row.signing_secrets), now()).map(withoutSecret) };
  }

  /** A new current secret, returned this once; the one it replaces keeps signing for the overlap. */
  async create(tenantId: string, streamId: string, input: CreateSigningSecretBody): Promise<SigningSecretCreated> {
    return transaction(this.database, async (trx) => {
      const row = await existingStream(this.store, tenantId, streamId, { trx, lock: true });
      const at = now();
      const fresh = newSigningSecret(at);
      const overlap = input.overlap_seconds ?? DEFAULT_SIGNING_OVERLAP_SECONDS;
      const secrets = rotate(openSigningSecrets(this.secretBox, row.signing_secrets), fresh, at, overlap);
      await this.store.setSigningSecrets(trx, tenantId, streamId, sealSigningSecrets(this.secretBox, secrets));
      return { id: fresh.id, secret: fresh.secret, created_at: fresh.created_at };
    });
  }

  /**
   * Makes `secret` the stream's only signing secret (a seed's `signing_secret`): not an API operation,
   * whose secrets are always generated. Refused unless Standard Webhooks libraries take it.
   */
  async set(tenantId: string, streamId: string, secret: string): Promise<void> {
    const problem = signingSecretProblem(secret);
    if (problem !== undefined) throw badRequest.payload(problem, 'signing_secret');
    await transaction(this.database, async (trx) => {
      await existingStream(this.store, tenantId, streamId, { trx, lock: true });
      const stored = { id: newId.signingSecret(), secret, created_at: now() };
      await this.store.setSigningSecrets(trx, tenantId, streamId, sealSigningSecrets(this.secretBox, [stored]));
    });
  }

  /** The secret signing the stream's deliveries now (the newest live one), in clear: for seed export only. */
  async current(tenantId: string, streamId: string): Promise<string | undefined> {
    const row = await existingStream(this.store, tenantId, streamId);
    return live(openSigningSecrets(this.secretBox, row.signing_secrets), now())[0]?.secret;
  }

  async delete(tenantId: string, streamId: string, secretId: string): Promise<void> {
    await transaction(this.database, async (trx) => {
      const row = await existingStream(this.store, tenantId, streamId, { trx, lock: true });
      const secrets = live(openSigningSecrets(this.secretBox, row.signing_secrets), now());
      if (!secrets.some((s) => s.id === secretId)) throw eventStreamErrors.signingSecretNotFound();
      await this.store.setSigningSecrets(
        trx,
        tenantId,
        streamId,
        sealSigningSecrets(this.secretBox, without(secrets, secretId)),
      );
    });
  }

  /** Deliveries go unsigned from now on. */
  async deleteAll(tenantId: string, streamId: string): Promise<void> {
    if (!(await this.store.clearSigningSecrets(tenantId, streamId))) throw eventStreamErrors.streamNotFound();
  }
}
