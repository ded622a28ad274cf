import { Type, type Static } from '@sinclair/typebox';

/** A snapshot's name: what a suite in another language keeps to restore it later. */
const SnapshotName = Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9._-]+$' });

export const SnapshotBody = Type.Object({ name: Type.Optional(SnapshotName) }, { additionalProperties: false });
export type SnapshotBody = Static<typeof SnapshotBody>;

export const RestoreBody = Type.Object({ name: SnapshotName }, { additionalProperties: false });
export type RestoreBody = Static<typeof RestoreBody>;

export const SnapshotResponse = Type.Object({ name: Type.String(), taken_at: Type.String() });
