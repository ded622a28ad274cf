/** A JSON object, as schemas and parsed bodies are. */
export type Json = Record<string, unknown>;

export function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A schema's `pattern` (or patternProperties key) as a RegExp; undefined when JavaScript cannot compile it. */
export function schemaRegExp(pattern: string): RegExp | undefined {
  try {
    return new RegExp(pattern, 'u');
  } catch {
    return undefined;
  }
}
