import { spawn, type ChildProcessByStdio } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { TestDatabase } from './databases.ts';

export const PROCESS_CLIENT_ID = 'process-admin';
export const PROCESS_CLIENT_SECRET = 'process-admin-secret-0123456789-abcdefghijkl';
/** Every node of one deployment shares the key that seals stream secrets. */
export const PROCESS_ENCRYPTION_KEY = '5f'.repeat(32);

/** `bin/tenantry.mjs serve` as a real child process: what an operator runs, and what SIGKILL can hit. */
export interface ServerProcess {
  pid: number;
  /** `http://127.0.0.1:<port>` */
  base: string;
  /** Resolves with the exit code (null after a signal). */
  exited: Promise<number | null>;
  /** SIGKILL, then waits for the process to be gone. */
  kill(): Promise<void>;
  /** SIGTERM (graceful), then waits for the exit. */
  stop(): Promise<void>;
  /** What the process wrote to stderr, when started with `stderr: 'collect'` (else it goes to this process's stderr). */
  stderr(): string;
  /**
   * With `logs: 'warnings'`: the warn and error lines of its JSON log (started at LOG_LEVEL=warn unless the
   * env says otherwise), each as `level msg: err.message`.
   */
  warnings(): string[];
}

export async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve, reject) => probe.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

/**
 * Starts a server on `database` (its DATA_DIR, and its PostgreSQL database when it has one) and
 * waits until it listens. The tenant's domain is fixed (`TENANT_DOMAIN`, default `process.test`) so
 * a restart on another port is the same tenant, and tokens stay valid across restarts.
 */
export async function startServerProcess(
  database: TestDatabase,
  env: Record<string, string> = {},
  options: {
    stderr?: 'inherit' | 'collect';
    logs?: 'warnings';
    readyWithinMs?: number;
    args?: string[];
    /** The working directory of the server (where it looks for a seed file); default: this process's. */
    cwd?: string;
  } = {},
): Promise<ServerProcess> {
  // freePort's port is free when chosen, but another test file running beside this one may take it
  // before the server listens (EADDRINUSE): the server is then started again on another port.
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const started = await launch(port);
    if (started.ready) return started.ready;
    if (!/EADDRINUSE/.test(started.stderr) || attempt === 3) throw started.error;
  }

  async function launch(
    port: number,
  ): Promise<
    | { ready: ServerProcess; stderr?: undefined; error?: undefined }
    | { ready?: undefined; stderr: string; error: Error }
  > {
    const child: ChildProcessByStdio<null, Readable, Readable> = spawn(
      process.execPath,
      [path.resolve('bin/tenantry.mjs'), 'serve', ...(options.args ?? [])],
      {
        cwd: options.cwd,
        env: {
          ...process.env,
          PORT: String(port),
          DATA_DIR: database.dataDir,
          DATABASE_URL: database.databaseUrl ?? '',
          TENANT_DOMAIN: 'process.test',
          BOOTSTRAP_CLIENT_ID: PROCESS_CLIENT_ID,
          BOOTSTRAP_CLIENT_SECRET: PROCESS_CLIENT_SECRET,
          ENCRYPTION_KEY: PROCESS_ENCRYPTION_KEY,
          LOG_LEVEL: options.logs === 'warnings' ? 'warn' : 'silent',
          ...env,
        },
        // Always piped, so that a port taken meanwhile can be told apart; passed on unless collected.
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    ) as ChildProcessByStdio<null, Readable, Readable>;
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      if (options.stderr !== 'collect') process.stderr.write(chunk);
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await new Promise<void>((resolve, reject) => {
        let output = '';
        // A process that is not ready in time is killed, so no caller is left with a child it cannot end.
        const timer =
          options.readyWithinMs === undefined
            ? undefined
            : setTimeout(() => {
                child.kill('SIGKILL');
                reject(new Error(`server not ready within ${options.readyWithinMs} ms`));
              }, options.readyWithinMs);
        child.stdout.on('data', (chunk: Buffer) => {
          output += chunk.toString();
          if (!output.includes('Tenantry serves')) return;
          clearTimeout(timer);
          resolve();
        });
        void exited.then((code) => {
          clearTimeout(timer);
          reject(new Error(`server exited (${code}) before it was ready`));
        });
      });
    } catch (error) {
      return { stderr, error: error as Error };
    }
    return { ready: readyProcess(child, port, exited, () => stderr, options.logs) };
  }
}

/** The handle of a server that is ready, with its warnings collected when asked for. */
function readyProcess(
  child: ChildProcessByStdio<null, Readable, Readable>,
  port: number,
  exited: Promise<number | null>,
  stderr: () => string,
  logs?: 'warnings',
): ServerProcess {
  const warnings: string[] = [];
  if (logs === 'warnings') {
    let partial = '';
    child.stdout.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString()).split('\n');
      partial = lines.pop()!;
      for (const line of lines) {
        if (!line.startsWith('{')) continue;
        try {
          const entry = JSON.parse(line) as { level?: number; msg?: string; err?: { message?: string } };
          if ((entry.level ?? 0) < 40) continue;
          const level = entry.level! >= 50 ? 'error' : 'warn';
          warnings.push(`${level} ${entry.msg ?? ''}${entry.err?.message ? `: ${entry.err.message}` : ''}`);
        } catch {
          // Not a log line.
        }
      }
    });
  }
  child.stdout.resume();
  return {
    pid: child.pid!,
    base: `http://127.0.0.1:${port}`,
    exited,
    async kill() {
      child.kill('SIGKILL');
      await exited;
    },
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
    stderr,
    warnings: () => warnings,
  };
}

/** An all-scopes token of the bootstrap admin client, fetched from the running server. */
export async function processToken(server: ServerProcess, domain = 'process.test'): Promise<string> {
  const response = await fetch(`${server.base}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      grant_type: 'client_credentials',
      client_id: PROCESS_CLIENT_ID,
      client_secret: PROCESS_CLIENT_SECRET,
      audience: `https://${domain}/api/v2/`,
    }),
  });
  if (response.status !== 200) throw new Error(`token request failed: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { access_token: string }).access_token;
}

/** A JSON request to the server's Management API. */
export async function api(
  server: ServerProcess,
  token: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: any }> {
  const response = await fetch(`${server.base}/api/v2${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text === '' ? undefined : JSON.parse(text) };
}
