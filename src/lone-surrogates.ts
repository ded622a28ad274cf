/**
 * Half of a UTF-16 surrogate pair without its other half. JSON may escape one (`"\ud800"`), but no UTF-8
 * text can hold it: a text column stores U+FFFD in its place, so a value answered as sent would be read
 * back changed. Bodies and imported users holding one are refused instead.
 */

/** Why a body or a user record holding one is refused. */
export const LONE_SURROGATE_MESSAGE =
  'a string holds a lone UTF-16 surrogate (an escape from \\ud800 to \\udfff without its pair), which is not text';

/** A JSON escape of a surrogate, paired or not: only text holding one can parse to a lone surrogate. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;
/** With the `u` flag a pair is one code point: only a lone half matches. */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * Where the value JSON.parse made of `text` holds a lone surrogate (see loneSurrogatePath). Only text
 * with a surrogate's escape is walked: no other JSON text can make one.
 */
export function loneSurrogateIn(text: string, value: unknown): string | undefined {
  return SURROGATE_ESCAPE.test(text) ? loneSurrogatePath(value) : undefined;
}

/**
 * Where `value` holds a lone surrogate, in a string or a member name: the JSON pointer of the first one
 * found (`/identities/0/user_id`, '' for the value itself, as Ajv's instancePath), or undefined when it
 * holds none. The walk keeps a stack of its own, so any depth is walked.
 */
export function loneSurrogatePath(value: unknown): string | undefined {
  const stack: Array<[unknown, string]> = [[value, '']];
  while (stack.length > 0) {
    const [next, path] = stack.pop()!;
    if (typeof next === 'string') {
      if (LONE_SURROGATE.test(next)) return path;
    } else if (typeof next === 'object' && next !== null) {
      for (const [name, member] of Object.entries(next)) {
        const at = `${path}/${name.replace(/~/g, '~0').replace(/\//g, '~1')}`;
        if (LONE_SURROGATE.test(name)) return at;
        stack.push([member, at]);
      }
    }
  }
  return undefined;
}
