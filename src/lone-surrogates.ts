/**
 * Half of a UTF-16 surrogate pair without its other half. JSON may escape one (`"\ud800"`), but no UTF-8
 * text can hold it: a text column stores U+FFFD in its place, so a value answered as sent would be read
 * back changed. Bodies, imported users and seeds holding one are refused instead.
 */

/** Why a body or a user record holding one is refused. */
export const LONE_SURROGATE_MESSAGE =
  'a string holds a lone UTF-16 surrogate (an escape from \\ud800 to \\udfff without its pair), which is not text';

/** A JSON escape of a surrogate, paired or not: only text holding one can parse to a lone surrogate. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;
/** With the `u` flag a pair is one code point: only a lone half matches. */
const LONE_SURROGATE = /\p{Cs}/u;

/** Whether JSON `text` may parse to a lone surrogate: only an escape can make one. */
export const mayHoldLoneSurrogate = (text: string): boolean => SURROGATE_ESCAPE.test(text);

/** Whether `text` holds half of a surrogate pair without the other. */
export const hasLoneSurrogate = (text: string): boolean => LONE_SURROGATE.test(text);

/**
 * Where the value JSON.parse made of `text` holds a lone surrogate (see loneSurrogatePath). Only text
 * with a surrogate's escape is walked: no other JSON text can make one.
 */
export function loneSurrogateIn(text: string, value: unknown): string | undefined {
  return mayHoldLoneSurrogate(text) ? loneSurrogatePath(value) : undefined;
}

/**
 * Where `value` holds a lone surrogate, in a string or a member name: the JSON pointer of the first one in
 * the value's order (`/identities/0/user_id`, '' for the value itself, as Ajv's instancePath), or
 * undefined when it holds none. A first walk, with a stack of its own (any depth) and no paths built,
 * says whether there is one; only then is its path looked for.
 */
export function loneSurrogatePath(value: unknown): string | undefined {
  return holdsOne(value) ? firstPath(value, '') : undefined;
}

function holdsOne(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const next = stack.pop();
    if (typeof next === 'string') {
      if (hasLoneSurrogate(next)) return true;
    } else if (typeof next === 'object' && next !== null) {
      for (const [name, member] of Object.entries(next)) {
        if (hasLoneSurrogate(name)) return true;
        stack.push(member);
      }
    }
  }
  return false;
}

/** The path of the first lone surrogate under `value` (which holds one), depth first in the value's order. */
function firstPath(value: unknown, path: string): string | undefined {
  if (typeof value === 'string') return hasLoneSurrogate(value) ? path : undefined;
  if (typeof value !== 'object' || value === null) return undefined;
  for (const [name, member] of Object.entries(value)) {
    const at = `${path}/${name.replace(/~/g, '~0').replace(/\//g, '~1')}`;
    if (hasLoneSurrogate(name)) return at;
    const found = firstPath(member, at);
    if (found !== undefined) return found;
  }
  return undefined;
}
