import { Type } from '@sinclair/typebox';

/** The `fields` and `include_fields` query members of the original's read endpoints. */
export const ProjectionQuery = {
  fields: Type.Optional(
    Type.String({
      maxLength: 1024,
      description: 'Comma-separated list of fields to include or exclude. Leave empty to retrieve all fields.',
    }),
  ),
  include_fields: Type.Optional(
    Type.Boolean({
      description: 'Whether specified fields are to be included (true) or excluded (false). Defaults to true.',
    }),
  ),
};

/** The member names of a `fields` value: comma-separated, trimmed, empty ones left out. */
export const parseFields = (fields: string | undefined): string[] =>
  // Most reads name no fields: no three arrays made to find none.
  fields === undefined || fields === ''
    ? []
    : fields
        .split(',')
        .map((f) => f.trim())
        .filter(Boolean);

/**
 * `fields` / `include_fields` projection: with include_fields (the default) only the listed members
 * are kept; with include_fields=false they are dropped. An empty list means every member.
 */
export function project<T extends object>(record: T, fields: readonly string[], include: boolean): Partial<T> {
  if (fields.length === 0) return record;
  const listed = new Set(fields);
  return Object.fromEntries(Object.entries(record).filter(([key]) => listed.has(key) === include)) as Partial<T>;
}
