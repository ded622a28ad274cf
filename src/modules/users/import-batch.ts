import { importRow, type ImportedUser, type ImportRow } from './imported-user.ts';

/** The columns of an ImportRow, in the order a batch holds them. */
const COLUMNS = [
  'user_id',
  'connection',
  'email',
  'document',
  'password_hash',
  'tokens',
] as const satisfies ReadonlyArray<keyof ImportRow>;
/** Each column's place among a user's values. */
const PLACE = Object.fromEntries(COLUMNS.map((column, place) => [column, place])) as Record<
  (typeof COLUMNS)[number],
  number
>;

/**
 * Imported users stamped `at`, ready to store, as bytes: an import's reading thread builds them and
 * hands them to the thread that stores them, which decodes each value as it stores it. Handed over as
 * strings, they were copied between the threads, then lived (and were copied again by every young-
 * generation collection) until their batch was stored, and filled the old generation: the storing
 * thread's heap grew by 100 MB between two full collections. Bytes move between threads without a
 * copy, outside either heap.
 */
export interface ImportBatch {
  at: string;
  /** Every user's values, in COLUMNS' order, UTF-8, end to end. */
  text: Uint8Array<ArrayBuffer>;
  /**
   * Where each value ends in `text`, user after user, in COLUMNS' order: a value starts where the one
   * before it ends. A null value is empty, its end stored as `-1 - end` (negative). Doubles, not
   * 32-bit integers: a batch of large records may hold more than 2 GB.
   */
  ends: Float64Array<ArrayBuffer>;
}

/** The memory of a batch, to be written again by the next (see ImportBatchBuilder). */
export interface BatchSpace {
  text: ArrayBuffer;
  ends: ArrayBuffer;
}

/** Builds an ImportBatch one record at a time. */
export class ImportBatchBuilder {
  private text: Buffer;
  private ends: Float64Array<ArrayBuffer>;
  private used = 0;
  private values = 0;

  /** `space`, when given, is where the batch is written (the memory of a batch stored already), as far as it fits. */
  constructor(
    readonly at: string,
    space?: BatchSpace,
  ) {
    // Never a slice of Node's shared pool: the memory is handed to another thread whole.
    // A first batch starts small (insertMany stores a handful of users) and doubles as it fills; an
    // import's later batches are written in the memory of earlier ones.
    this.text = space ? Buffer.from(space.text) : Buffer.allocUnsafeSlow(64 * 1024);
    this.ends = new Float64Array(space?.ends ?? new ArrayBuffer(128 * COLUMNS.length * 8));
  }

  get size(): number {
    return this.values / COLUMNS.length;
  }

  /** Adds one imported record, as a user stamped with the batch's time. */
  add(record: ImportedUser): void {
    const row = importRow(record, this.at);
    if (this.values + COLUMNS.length > this.ends.length) {
      const larger = new Float64Array(this.ends.length * 2);
      larger.set(this.ends);
      this.ends = larger;
    }
    for (const column of COLUMNS) {
      const value = row[column];
      if (value === null) {
        this.ends[this.values++] = -1 - this.used;
        continue;
      }
      // A UTF-16 code unit is at most 3 bytes of UTF-8.
      const most = this.used + value.length * 3;
      if (most > this.text.length) {
        const larger = Buffer.allocUnsafeSlow(Math.max(most, this.text.length * 2));
        this.text.copy(larger, 0, 0, this.used);
        this.text = larger;
      }
      this.used += this.text.write(value, this.used);
      this.ends[this.values++] = this.used;
    }
  }

  build(): ImportBatch {
    return {
      at: this.at,
      text: new Uint8Array(this.text.buffer as ArrayBuffer, this.text.byteOffset, this.used),
      ends: this.ends.subarray(0, this.values),
    };
  }
}

export function importBatchOf(records: Iterable<ImportedUser>, at: string): ImportBatch {
  const builder = new ImportBatchBuilder(at);
  for (const record of records) builder.add(record);
  return builder.build();
}

/** The memory a batch was written in, once it is stored: for the next (see ImportBatchBuilder). */
export const batchSpace = (batch: ImportBatch): BatchSpace => ({ text: batch.text.buffer, ends: batch.ends.buffer });

/**
 * A batch's users, read back by index (0 to size - 1), each value decoded when it is asked for: the
 * storing thread holds no more than the user it stores as strings.
 */
export function batchUsers(batch: ImportBatch): {
  size: number;
  document(index: number): string;
  row(index: number): ImportRow;
} {
  const text = Buffer.from(batch.text.buffer, batch.text.byteOffset, batch.text.byteLength);
  const { ends } = batch;
  const endOf = (stored: number) => (stored < 0 ? -1 - stored : stored);
  const value = (at: number): string | null => {
    if (ends[at]! < 0) return null;
    return text.toString('utf8', at === 0 ? 0 : endOf(ends[at - 1]!), ends[at]);
  };
  const base = (index: number) => index * COLUMNS.length;
  return {
    size: ends.length / COLUMNS.length,
    document: (index) => value(base(index) + PLACE.document)!,
    row: (index) => {
      const at = base(index);
      return {
        user_id: value(at + PLACE.user_id)!,
        connection: value(at + PLACE.connection)!,
        email: value(at + PLACE.email),
        document: value(at + PLACE.document)!,
        password_hash: value(at + PLACE.password_hash),
        tokens: value(at + PLACE.tokens),
      };
    },
  };
}
