import fs from 'node:fs';
import { Type } from '@sinclair/typebox';
import type { ValidateFunction } from 'ajv';
import { renderPath, validationError, validatorCompiler } from '../../http/validation.ts';
import { FileFormatError, RecordSplitter, type FileRecord } from '../users-imports/records.ts';
import { LONE_SURROGATE_MESSAGE, loneSurrogateIn } from '../../lone-surrogates.ts';
import type { ImportedUser } from './imported-user.ts';
import { IdentitySchema, profileMembers } from './user.ts';

export const ImportedUserSchema = Type.Object(
  {
    user_id: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    connection: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    identities: Type.Optional(Type.Array(IdentitySchema, { minItems: 1 })),
    password_hash: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
    ...profileMembers,
  },
  { additionalProperties: false },
);

let validator: ValidateFunction | undefined;

export class ImportError extends Error {
  /** Users of the batches committed before the failure. */
  imported = 0;
}

export interface ImportedRecord {
  /** Line of the NDJSON file, or 1-based position in the JSON array. */
  position: number;
  user: ImportedUser;
  /** Share of the file read so far, 0–1, by bytes (either format). */
  fraction: number;
}

/**
 * Reads a JSON array or NDJSON (one user a line), told apart by the first character that is not white
 * space, streamed either way (RecordSplitter), so a file of millions of users never has to fit in memory.
 * Every record is validated as it is read: the first invalid one throws, naming its line (NDJSON) or its
 * position in the array. The records come a chunk of the file at a time, each parsed and validated as
 * it is reached: an async generator of single records cost a promise and a turn of the microtask queue
 * per user.
 */
export async function* readImportFile(file: string): AsyncGenerator<Iterable<ImportedRecord>> {
  let size: number;
  try {
    size = fs.statSync(file).size;
  } catch (error) {
    throw new ImportError(`cannot open ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  const splitter = new RecordSplitter();
  let read = 0;
  const split = (next: () => FileRecord[]): FileRecord[] => {
    try {
      return next();
    } catch (error) {
      if (error instanceof FileFormatError) throw new ImportError(`${file}: ${error.message}`);
      throw error;
    }
  };
  // Where a record is, for an error about it: only made when there is one.
  const where = (record: FileRecord) =>
    `${file} ${splitter.fileFormat === 'ndjson' ? 'line' : 'record'} ${record.position}`;
  function* parsed(records: FileRecord[]): Generator<ImportedRecord> {
    for (const record of records) {
      let value: unknown;
      try {
        value = JSON.parse(record.text);
      } catch (error) {
        throw new ImportError(`${where(record)}: not valid JSON: ${(error as Error).message}`);
      }
      const user = validRecord(value, () => where(record));
      const surrogateAt = loneSurrogateIn(record.text, user);
      if (surrogateAt !== undefined)
        throw new ImportError(
          `${where(record)}: ${renderPath(surrogateAt) || 'the record'}: ${LONE_SURROGATE_MESSAGE}`,
        );
      yield { position: record.position, user, fraction: size > 0 ? read / size : 1 };
    }
  }
  for await (const chunk of fs.createReadStream(file)) {
    read += (chunk as Buffer).length;
    yield parsed(split(() => splitter.push(chunk as Buffer)));
  }
  yield parsed(split(() => splitter.end()));
}

function validRecord(value: unknown, where: () => string): ImportedUser {
  validator ??= validatorCompiler({ schema: ImportedUserSchema, httpPart: 'body' });
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ImportError(`${where()}: a user must be a JSON object`);
  if (!validator(value))
    throw new ImportError(`${where()}: ${validationError(validator.errors ?? [], 'body').message}`);
  return value as ImportedUser;
}
