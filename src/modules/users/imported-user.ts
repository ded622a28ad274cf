import { newId } from '../../ids.ts';
import type { UserRecord } from './store.ts';
import {
  buildUser,
  DEFAULT_CONNECTION,
  OWN_PROVIDER,
  OWN_PROVIDER_ALIASES,
  separateIdpTokens,
  type Identity,
  type IdpTokens,
  type Profile,
  type User,
} from './user.ts';

/** One record of a bulk import (JSON array or NDJSON), as the import command reads it. */
export interface ImportedUser extends Profile {
  user_id?: string;
  connection?: string;
  identities?: Identity[];
  password_hash?: string;
}

/** What an imported record becomes: the stored user, its connection, and what is kept beside the document. */
export interface UserFromImport {
  user: User;
  connection: string;
  /** Identity-provider tokens split off the identities (to be sealed at rest); null when none. */
  tokens: IdpTokens[] | null;
  passwordHash: string | null;
}

/**
 * An imported record as a user. The first identity names the provider, connection and local id; without
 * identities the user is one of the server's own database connection. `user_id` defaults to
 * `provider|local id` (the server's own provider for its aliases), and a given `user_id` lends its local
 * part when there are no identities.
 */
export function userFromImport(
  record: ImportedUser,
  at: string,
  newLocalId: () => string = newId.userLocalId,
): UserFromImport {
  const {
    user_id: givenId,
    connection: givenConnection,
    identities: givenIdentities,
    password_hash: passwordHash,
    ...profile
  } = record;
  const first = givenIdentities?.[0];
  const provider = first?.provider ?? OWN_PROVIDER;
  const own = OWN_PROVIDER_ALIASES.has(provider);
  // Only the server's own database lower-cases emails; other providers' emails keep their case.
  if (own && profile.email !== undefined) profile.email = profile.email.toLowerCase();
  const localId = String(first?.user_id ?? givenId?.replace(/^[^|]+\|/, '') ?? newLocalId());
  const connection = first?.connection ?? givenConnection ?? DEFAULT_CONNECTION;
  const identities: Identity[] = givenIdentities ?? [
    { connection, user_id: localId, provider: OWN_PROVIDER, isSocial: false },
  ];
  const userId = givenId ?? `${own ? OWN_PROVIDER : provider}|${localId}`;
  const separated = separateIdpTokens(
    identities.map((i) => (OWN_PROVIDER_ALIASES.has(i.provider) ? { ...i, provider: OWN_PROVIDER } : i)),
  );
  const user = buildUser(profile, separated.identities, userId, at);
  return { user, connection, tokens: separated.tokens, passwordHash: passwordHash ?? null };
}

/**
 * An imported user ready to store: its columns of the users table but the tenant and the timestamps
 * (its batch's), and its identity-provider tokens as JSON, still to be sealed where they are stored
 * (an import's reading thread never holds the key).
 */
export type ImportRow = Pick<UserRecord, 'user_id' | 'connection' | 'email' | 'document' | 'password_hash'> & {
  tokens: string | null;
};

export function importRow(record: ImportedUser, at: string): ImportRow {
  const { user, connection, tokens, passwordHash } = userFromImport(record, at);
  return {
    user_id: user.user_id,
    connection,
    email: user.email ?? null,
    document: JSON.stringify(user),
    password_hash: passwordHash,
    tokens: tokens && JSON.stringify(tokens),
  };
}
