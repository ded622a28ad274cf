import fs from 'node:fs';
import readline from 'node:readline';
import { Type } from '@sinclair/typebox';
import type { ValidateFunction } from 'ajv';
import { validationError, validatorCompiler } from '../../http/validation.ts';
import type { ImportedUser } from './imported-user.ts';
import { DuplicateUsers, type UserService } from './service.ts';
import { IdentitySchema, profileMembers } from './user.ts';

const ImportedUserSchema = Type.Object(
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
  /** Share of the file read so far, 0–1 (by bytes for NDJSON, by records for an array). */
  fraction: number;
}

/**
 * Reads a JSON array (the whole file at once) or NDJSON (streamed line by line, so a file of millions
 * of users never has to fit in memory); the format is told by the first non-space character.
 * Every record is validated as it is read: the first invalid one throws, naming its line.
 */
export async function* readImportFile(file: string): AsyncGenerator<ImportedRecord> {
  const isArray = firstCharacter(file) === '[';
  if (isArray) {
    let records: unknown;
    try {
      records = JSON.parse(fs.readFileSync(file, 'utf8').replace(/^\uFEFF/, ''));
    } catch (error) {
      throw new ImportError(`${file}: not valid JSON: ${(error as Error).message}`);
    }
    const list = records as unknown[];
    for (let i = 0; i < list.length; i++)
      yield { position: i + 1, user: validRecord(list[i], `${file} record ${i + 1}`), fraction: (i + 1) / list.length };
    return;
  }
  const size = fs.statSync(file).size;
  const input = fs.createReadStream(file, 'utf8');
  const lines = readline.createInterface({ input, crlfDelay: Infinity });
  let line = 0;
  for await (const text of lines) {
    line++;
    const trimmed = (line === 1 ? text.replace(/^\uFEFF/, '') : text).trim();
    if (trimmed === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(trimmed);
    } catch (error) {
      throw new ImportError(`${file} line ${line}: not valid JSON: ${(error as Error).message}`);
    }
    const fraction = size > 0 ? Math.min(1, input.bytesRead / size) : 1;
    yield { position: line, user: validRecord(value, `${file} line ${line}`), fraction };
  }
}

function firstCharacter(file: string): string | undefined {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch (error) {
    throw new ImportError(`cannot open ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  try {
    const buffer = Buffer.alloc(64 * 1024);
    for (;;) {
      const read = fs.readSync(fd, buffer, 0, buffer.length, null);
      if (read === 0) return undefined;
      const match = /[^\s\uFEFF]/.exec(buffer.toString('utf8', 0, read));
      if (match) return match[0];
    }
  } finally {
    fs.closeSync(fd);
  }
}

function validRecord(value: unknown, where: string): ImportedUser {
  validator ??= validatorCompiler({ schema: ImportedUserSchema, httpPart: 'body' });
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ImportError(`${where}: a user must be a JSON object`);
  if (!validator(value)) throw new ImportError(`${where}: ${validationError(validator.errors ?? [], 'body').message}`);
  return value as ImportedUser;
}

export interface ImportSummary {
  imported: number;
  seconds: number;
}

/**
 * Imports a file in batches of `batchSize`, one transaction each. It stops at the first invalid record
 * or failing batch: the batches before it stay imported (`ImportError.imported` says how many users),
 * nothing of the failing batch is.
 */
export async function importUsers(
  users: UserService,
  tenantId: string,
  file: string,
  batchSize: number,
  onBatch: (imported: number, fraction: number) => void = () => {},
): Promise<ImportSummary> {
  const started = process.hrtime.bigint();
  let imported = 0;
  let batch: ImportedUser[] = [];
  let batchNumber = 0;
  let firstPosition = 0;
  let lastPosition = 0;
  let fraction = 0;
  const flush = async () => {
    if (batch.length === 0) return;
    batchNumber++;
    try {
      imported += await users.insertMany(tenantId, batch);
    } catch (error) {
      const range = `batch ${batchNumber} (records ${firstPosition}–${lastPosition} of ${file})`;
      if (error instanceof DuplicateUsers) throw new ImportError(`${range}: ${error.message}`);
      throw new ImportError(`${range}: ${(error as Error).message}`);
    }
    batch = [];
    onBatch(imported, fraction);
  };
  try {
    for await (const record of readImportFile(file)) {
      const { position, user } = record;
      fraction = record.fraction;
      if (batch.length === 0) firstPosition = position;
      lastPosition = position;
      batch.push(user);
      if (batch.length >= batchSize) await flush();
    }
    await flush();
  } catch (error) {
    if (error instanceof ImportError) error.imported = imported;
    throw error;
  }
  return { imported, seconds: Number(process.hrtime.bigint() - started) / 1e9 };
}
