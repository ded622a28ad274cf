import { badRequest } from './errors.ts';

/** Paging cursors are the last key of a page, base64url-encoded: opaque to clients. */
export const encodeCursor = (key: string): string => Buffer.from(key, 'utf8').toString('base64url');

/**
 * The key a cursor stands for. Node's base64 decoder skips characters it does not know, so only a
 * cursor that round-trips exactly, to a key of the expected form, is one this server made.
 */
export function decodeCursor(
  cursor: string,
  isKey: (key: string) => boolean,
  parameter: { name: string; description: string } = {
    name: 'from',
    description: 'Cursor from which to start selection',
  },
): string {
  const key = Buffer.from(cursor, 'base64url').toString('utf8');
  if (key === '' || !isKey(key) || encodeCursor(key) !== cursor) {
    throw badRequest.queryParameter('Invalid cursor', parameter.name, parameter.description);
  }
  return key;
}
