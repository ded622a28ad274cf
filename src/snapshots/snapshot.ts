declare const saved: unique symbol;

/**
 * A saved state of the whole database; restore() returns to it, as often as wanted. Opaque to its
 * holder, and in a module of its own: the package's types name no database types, which a project
 * using it may not have installed.
 */
export interface Snapshot {
  readonly takenAt: string;
  readonly [saved]: true;
}
