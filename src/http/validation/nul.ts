import type { ValidateFunction } from 'ajv';
import { isObject } from './json.ts';

const withoutNulCache = new WeakMap<ValidateFunction, ValidateFunction>();

type Validate = (this: unknown, data: unknown, context?: unknown) => boolean;

/**
 * No path parameter, query or header value, and no top-level string member of a body, may hold NUL
 * (U+0000): those land in text columns, where PostgreSQL refuses the character (a 500 there, stored
 * as given on SQLite). Strings nested deeper are kept inside JSON, where NUL is escaped and fine.
 */
export function withoutNul(validate: ValidateFunction): ValidateFunction {
  let wrapped = withoutNulCache.get(validate);
  if (wrapped !== undefined) return wrapped;
  const check = function (this: unknown, data: unknown, context?: unknown): boolean {
    check.errors = null;
    if (!(validate as Validate).call(this, data, context)) {
      check.errors = validate.errors;
      return false;
    }
    const at = nulMember(data);
    if (at === undefined) return true;
    check.errors = [
      { keyword: 'nul', instancePath: at, schemaPath: '#', params: {}, message: 'String contains the NUL character' },
    ];
    return false;
  } as ValidateFunction;
  wrapped = Object.assign(check, { schema: validate.schema });
  withoutNulCache.set(validate, wrapped);
  return wrapped;
}

/** JSON pointer of the value, or of its first direct string member, holding NUL. */
function nulMember(data: unknown): string | undefined {
  if (typeof data === 'string') return data.includes('\0') ? '' : undefined;
  if (!isObject(data)) return undefined;
  for (const [key, value] of Object.entries(data)) {
    if (typeof value === 'string' && value.includes('\0')) return `/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`;
  }
  return undefined;
}
