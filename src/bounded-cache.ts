/**
 * The one in-memory cache of the server: a Map bounded both in entries and in bytes, the oldest entry
 * going first when either bound would be passed. Keys of several caches are chosen by clients (Host
 * headers, tokens, header names): a bound in entries alone lets a few thousand 16 KB keys hold hundreds
 * of megabytes, so each entry is charged its key's length and the size its owner states for its value.
 *
 * Eviction is by age of insertion, not of use: a hit costs one Map lookup and no reordering, which is
 * what the request path can afford; every cache here also expires its entries within seconds or
 * re-validates them, so an old entry that is still wanted is stored again on its next miss.
 */
export interface CacheBounds {
  entries: number;
  bytes: number;
}

/** What an entry costs beyond its key and stated size: the Map slot and the entry's own object. */
const ENTRY_OVERHEAD_BYTES = 64;

export class BoundedCache<V> {
  private readonly map = new Map<string, { value: V; bytes: number }>();
  private bytes = 0;

  constructor(private readonly bounds: CacheBounds) {}

  get size(): number {
    return this.map.size;
  }

  /** Bytes charged to the entries held now (keys as UTF-16, values as their owners stated). */
  get chargedBytes(): number {
    return this.bytes;
  }

  get(key: string): V | undefined {
    return this.map.get(key)?.value;
  }

  /**
   * Stores `value` under `key`, charged `valueBytes` (an estimate is enough: strings count two bytes
   * per character). An entry larger than the whole budget is not stored.
   */
  set(key: string, value: V, valueBytes = 0): void {
    const bytes = key.length * 2 + valueBytes + ENTRY_OVERHEAD_BYTES;
    this.delete(key);
    if (bytes > this.bounds.bytes) return;
    while (this.map.size >= this.bounds.entries || this.bytes + bytes > this.bounds.bytes) {
      const oldest = this.map.keys().next();
      if (oldest.done) break;
      this.delete(oldest.value);
    }
    this.map.set(key, { value, bytes });
    this.bytes += bytes;
  }

  delete(key: string): void {
    const entry = this.map.get(key);
    if (!entry) return;
    this.map.delete(key);
    this.bytes -= entry.bytes;
  }

  clear(): void {
    this.map.clear();
    this.bytes = 0;
  }
}

/** Bytes a string is charged: two per UTF-16 code unit. */
export const stringBytes = (value: string | null | undefined): number => (value ? value.length * 2 : 0);
