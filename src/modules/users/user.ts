import { hash } from 'node:crypto';
import { Type, type Static } from '@sinclair/typebox';

/** The identity provider word the server emits for its own database connections (the original's `auth0`). */
export const OWN_PROVIDER = 'svc';
export const OWN_PROVIDER_ALIASES: ReadonlySet<string> = new Set([OWN_PROVIDER, 'auth0']);
export const DEFAULT_CONNECTION = 'Username-Password-Authentication';

const Metadata = Type.Record(Type.String(), Type.Unknown());

export const IdentitySchema = Type.Object(
  {
    connection: Type.String({ minLength: 1, maxLength: 128 }),
    user_id: Type.Union([Type.String({ minLength: 1, maxLength: 255 }), Type.Integer()]),
    provider: Type.String({ minLength: 1, maxLength: 64 }),
    isSocial: Type.Boolean(),
    access_token: Type.Optional(Type.String({ maxLength: 8192 })),
    access_token_secret: Type.Optional(Type.String({ maxLength: 8192 })),
    refresh_token: Type.Optional(Type.String({ maxLength: 8192 })),
    profileData: Type.Optional(Metadata),
  },
  { additionalProperties: false },
);
export type Identity = Static<typeof IdentitySchema>;

/** User object of spec 2.1 as stored and returned (identity-provider tokens are kept apart). */
export interface User {
  blocked?: boolean;
  created_at: string;
  email?: string;
  email_verified?: boolean;
  family_name?: string;
  given_name?: string;
  identities: Identity[];
  name?: string;
  nickname?: string;
  phone_number?: string;
  phone_verified?: boolean;
  picture?: string;
  updated_at: string;
  user_id: string;
  user_metadata?: Record<string, unknown>;
  username?: string;
  app_metadata?: Record<string, unknown>;
  [key: string]: unknown;
}

export const IDP_TOKEN_FIELDS = ['access_token', 'access_token_secret', 'refresh_token'] as const;
export type IdpTokens = Partial<Record<(typeof IDP_TOKEN_FIELDS)[number], string>>;

/** Profile members shared by the create body and the import file. */
export const profileMembers = {
  email: Type.Optional(Type.String({ format: 'email', maxLength: 320 })),
  email_verified: Type.Optional(Type.Boolean()),
  username: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
  phone_number: Type.Optional(Type.String({ pattern: '^\\+[0-9]{1,15}$' })),
  phone_verified: Type.Optional(Type.Boolean()),
  given_name: Type.Optional(Type.String({ minLength: 1, maxLength: 150 })),
  family_name: Type.Optional(Type.String({ minLength: 1, maxLength: 150 })),
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 300 })),
  nickname: Type.Optional(Type.String({ minLength: 1, maxLength: 300 })),
  picture: Type.Optional(Type.String({ format: 'uri', maxLength: 2048 })),
  blocked: Type.Optional(Type.Boolean()),
  user_metadata: Type.Optional(Metadata),
  app_metadata: Type.Optional(Metadata),
};

export type Profile = { [K in keyof typeof profileMembers]?: Static<(typeof profileMembers)[K]> };

/** The original's default picture: a Gravatar URL derived from the email (no request is made for it). */
function defaultPicture(email: string | undefined, name: string): string {
  // The one-shot hash: a third of createHash's time, which an import of a million users pays a million times.
  const digest = hash('md5', (email ?? name).trim().toLowerCase(), 'hex');
  return `https://s.gravatar.com/avatar/${digest}?s=480&r=pg&d=identicon`;
}

/**
 * Builds a stored user from a profile and its identities, with the original's defaults: `name` is the
 * email, `nickname` the email's local part, and a picture.
 */
export function buildUser(profile: Profile, identities: Identity[], userId: string, at: string): User {
  const name = profile.name ?? profile.email ?? profile.phone_number ?? profile.username ?? userId;
  const nickname =
    profile.nickname ?? (profile.email ? profile.email.split('@')[0] : undefined) ?? profile.username ?? name;
  // Members are added in the original's order, each only when it has a value: an object built with
  // undefined members and then stripped of them (delete) turns into a slow dictionary-mode object:
  // building and serialising a user (an import does it a million times) took twice as long.
  const user = { blocked: profile.blocked ?? false, created_at: at } as User;
  if (profile.email !== undefined) {
    user.email = profile.email;
    user.email_verified = profile.email_verified ?? false;
  }
  if (profile.family_name !== undefined) user.family_name = profile.family_name;
  if (profile.given_name !== undefined) user.given_name = profile.given_name;
  user.identities = identities;
  user.name = name;
  user.nickname = nickname;
  if (profile.phone_number !== undefined) {
    user.phone_number = profile.phone_number;
    user.phone_verified = profile.phone_verified ?? false;
  }
  user.picture = profile.picture ?? defaultPicture(profile.email, name);
  user.updated_at = at;
  user.user_id = userId;
  if (profile.user_metadata !== undefined) user.user_metadata = profile.user_metadata;
  if (profile.username !== undefined) user.username = profile.username;
  if (profile.app_metadata !== undefined) user.app_metadata = profile.app_metadata;
  return user;
}

/**
 * PATCH /users/{id}: the given profile members replace the stored ones; user_metadata and app_metadata
 * are merged one level deep (a null member removes a key), as the original. A user of the server's own
 * database has its new email lower-cased; other providers' emails keep their case.
 */
export function applyProfileChanges(stored: User, changes: Profile): User {
  const user: User = { ...stored };
  const own = user.identities.some((i) => OWN_PROVIDER_ALIASES.has(i.provider));
  for (const [key, value] of Object.entries(changes)) {
    if (value === undefined) continue;
    if (key === 'user_metadata' || key === 'app_metadata') {
      const merged: Record<string, unknown> = { ...((user[key] as Record<string, unknown> | undefined) ?? {}) };
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
        if (v === null) delete merged[k];
        else merged[k] = v;
      }
      user[key] = merged;
    } else if (key === 'email' && own) {
      user.email = (value as string).toLowerCase();
    } else {
      user[key] = value;
    }
  }
  // A new address has not been verified, whatever the old one was, unless the change says it is: as the
  // original, which sets email_verified to false when the email changes without it.
  if (changes.email_verified === undefined && user.email !== stored.email) user.email_verified = false;
  return user;
}

/** Splits identity-provider tokens off the identities so the stored document never holds them. */
export function separateIdpTokens(identities: Identity[]): { identities: Identity[]; tokens: IdpTokens[] | null } {
  let any = false;
  const tokens: IdpTokens[] = [];
  const clean = identities.map((identity) => {
    const copy: Identity = { ...identity };
    const held: IdpTokens = {};
    for (const field of IDP_TOKEN_FIELDS) {
      if (copy[field] !== undefined) {
        held[field] = copy[field];
        delete copy[field];
        any = true;
      }
    }
    tokens.push(held);
    return copy;
  });
  return { identities: clean, tokens: any ? tokens : null };
}
