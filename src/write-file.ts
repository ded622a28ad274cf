import { randomBytes } from 'node:crypto';
import fs from 'node:fs';

/**
 * Writes `file` whole with exactly `mode`, through a new file beside it renamed over it: a reader never
 * sees half a file, and a file that held secrets is never left with the mode of an earlier file of the
 * same name (a write over an existing file keeps its mode) nor written through a symlink found there
 * (the rename replaces the link itself). The new file is created exclusively and given its mode whatever
 * the umask.
 */
export function writeFileReplacing(file: string, contents: string | Buffer, mode: number): void {
  const temporary = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    fs.writeFileSync(temporary, contents, { mode, flag: 'wx' });
    fs.chmodSync(temporary, mode);
    fs.renameSync(temporary, file);
  } catch (error) {
    fs.rmSync(temporary, { force: true });
    throw error;
  }
}
