import { spawn } from 'node:child_process';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '../..');

/** What one `bin/tenantry.mjs` run left: its exit code (null after a signal) and all it printed. */
export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `bin/tenantry.mjs ...args` as a child process, from the project root, with exactly `env` (not
 * this process's environment, so the test states every setting the command sees). With
 * `readerGone`, the read end of its output is closed at once, before the command can write, as
 * `| head -1` closes it after a line; with `errorReaderGone`, that of its stderr.
 */
export function runCli(
  env: Record<string, string>,
  args: string[],
  options: { readerGone?: boolean; errorReaderGone?: boolean } = {},
): Promise<CliRun> {
  return new Promise<CliRun>((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(root, 'bin/tenantry.mjs'), ...args], { cwd: root, env });
    if (options.readerGone) child.stdout.destroy();
    if (options.errorReaderGone) child.stderr.destroy();
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
