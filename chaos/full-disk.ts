import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const TMPFS_SIZE = '8m';

/** Mounts a small tmpfs on `dir` (which must be empty); returns what unmounts it. */
export function mountTmpfs(dir: string): () => void {
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${TMPFS_SIZE}`, 'tmpfs', dir], { encoding: 'utf8' });
  if (mounted.status !== 0) throw new Error(`mount -t tmpfs failed: ${mounted.stderr || mounted.error?.message}`);
  return () => {
    const unmounted = spawnSync('umount', [dir], { encoding: 'utf8' });
    if (unmounted.status !== 0)
      throw new Error(`umount ${dir} failed: ${unmounted.stderr || unmounted.error?.message}`);
  };
}

let probed: string | undefined | null = null;

/** Why no tmpfs can be mounted here (not Linux, not root, no mount), or undefined when one can: tried once. */
export function tmpfsUnavailable(): string | undefined {
  if (probed !== null) return probed;
  if (process.platform !== 'linux') return (probed = 'needs Linux to mount a small tmpfs');
  if (process.getuid?.() !== 0) return (probed = 'needs root to mount a small tmpfs (mount -t tmpfs)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-tmpfs-probe-'));
  try {
    mountTmpfs(dir)();
    probed = undefined;
  } catch (error) {
    probed = `cannot mount a tmpfs: ${(error as Error).message.trim()}`;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return probed;
}

/**
 * Writes a file in `dir` until the file system is full (ENOSPC), in 64 KiB then 4 KiB blocks; `free`
 * deletes it. Bounded by a count of writes: a file system that never fills stops the loop too.
 */
export function fillUp(dir: string): { bytes: number; free(): void } {
  const file = path.join(dir, 'filler');
  const fd = fs.openSync(file, 'w');
  let bytes = 0;
  try {
    for (const size of [64 * 1024, 4096]) {
      const block = Buffer.alloc(size, 0x5a);
      for (let i = 0; i < 4096; i++) {
        try {
          const written = fs.writeSync(fd, block);
          bytes += written;
          if (written < size) break;
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === 'ENOSPC') break;
          throw error;
        }
      }
    }
  } finally {
    fs.closeSync(fd);
  }
  return { bytes, free: () => fs.rmSync(file, { force: true }) };
}
