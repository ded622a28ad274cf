/**
 * Shared machinery of the benchmarks: child processes (a Tenantry server, a bare node:http server,
 * the seeder), readiness, autocannon runs, and the printed tables. All traffic stays on 127.0.0.1.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

export const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url));
export const HOST = '127.0.0.1';
/** The tenant's canonical domain: the Host autocannon sends (127.0.0.1:<port>) resolves to it without the port. */
export const TENANT_DOMAIN = HOST;
export const ADMIN_ID = 'bench-admin-client';
export const ADMIN_SECRET = 'bench-admin-secret-with-enough-entropy-0123456789';
export const AUDIENCE = `https://${TENANT_DOMAIN}/api/v2/`;

/** Environment of every Tenantry child: SQLite in `dataDir`, a limiter that never refuses, no logs. */
export function serverEnv(dataDir: string): Record<string, string> {
  return {
    DATA_DIR: dataDir,
    DATABASE_URL: '',
    REDIS_URL: '',
    TENANT_DOMAIN,
    BOOTSTRAP_CLIENT_ID: ADMIN_ID,
    BOOTSTRAP_CLIENT_SECRET: ADMIN_SECRET,
    RATE_LIMIT_SIZE: '1000000000',
    RATE_LIMIT_PER_SECOND: '1000000000',
    LOG_LEVEL: 'silent',
    HOST,
    PORT: '0',
  };
}

export function tempDir(prefix: string): { dir: string; remove(): void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `tenantry-bench-${prefix}-`));
  return { dir, remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/** The i-th generated user: a unique, lower-case email and a small profile. */
export function generatedUser(i: number) {
  return {
    email: `user${i}@bench.example`,
    email_verified: i % 2 === 0,
    given_name: `Given${i}`,
    family_name: `Family${i}`,
    name: `Given${i} Family${i}`,
    user_metadata: { plan: i % 3 === 0 ? 'pro' : 'free' },
  };
}

export interface Child {
  pid: number;
  /** The JSON the child printed after `READY ` (port, token, figures…). */
  ready: Record<string, unknown>;
  /** Resident set size of the child, in bytes, from /proc/<pid>/status. */
  rss(): number;
  stop(): Promise<void>;
  /** Where the child's stdout (its log lines) goes, when not to the parent. */
  logFile?: string;
}

/**
 * Runs `bench/<script>` with tsx in its own Node process and waits for the line `READY {json}`.
 * A child that exits first, or takes longer than `timeoutMs`, is an error. With `stdoutFile`, the
 * child's stdout (a server's JSON log lines) goes to that file, as an operator's would, and the child
 * announces itself on fd 3 instead (child-server.ts `announce`): the parent, which runs autocannon,
 * never spends its CPU reading the logs.
 */
export function spawnChild(
  script: string,
  args: string[],
  env: Record<string, string> = {},
  timeoutMs = 600_000,
  stdoutFile?: string,
  nodeArgs: string[] = [],
): Promise<Child> {
  const out = stdoutFile === undefined ? undefined : fs.openSync(stdoutFile, 'w');
  const child: ChildProcess = spawn(
    process.execPath,
    [...nodeArgs, '--import', 'tsx', path.join(BENCH_DIR, script), ...args],
    {
      env: { ...process.env, ...env, ...(out === undefined ? {} : { BENCH_ANNOUNCE_FD: '3' }) },
      stdio: out === undefined ? ['ignore', 'pipe', 'inherit'] : ['ignore', out, 'inherit', 'pipe'],
    },
  );
  if (out !== undefined) fs.closeSync(out);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${script} not ready within ${timeoutMs} ms`));
    }, timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited (${code}) before it was ready`));
    });
    const lines = readline.createInterface({
      input: (out === undefined ? child.stdout : child.stdio[3]) as NodeJS.ReadableStream,
    });
    lines.on('line', (line) => {
      if (line.startsWith('PROGRESS ')) {
        process.stdout.write(`    ${script}: ${line.slice(9)}\n`);
        return;
      }
      if (!line.startsWith('READY ')) return;
      clearTimeout(timer);
      const ready = JSON.parse(line.slice(6)) as Record<string, unknown>;
      resolve({
        pid: child.pid!,
        ready,
        rss: () => readRss(child.pid!),
        ...(stdoutFile === undefined ? {} : { logFile: stdoutFile }),
        async stop() {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
          await exited;
        },
      });
    });
  });
}

/** Runs a child to completion and returns its `READY` JSON (the seeder reports its figures that way). */
export async function runChild(
  script: string,
  args: string[],
  env: Record<string, string> = {},
  timeoutMs = 600_000,
): Promise<SeedFigures> {
  const child = await spawnChild(script, args, env, timeoutMs);
  await child.stop();
  return child.ready as unknown as SeedFigures;
}

/** Runs a command to completion; its stdout, and the wall time from spawn to exit. */
export function runCommand(
  args: string[],
  env: Record<string, string>,
): Promise<{ stdout: string; ms: number; rss: number }> {
  const started = performance.now();
  const child = spawn(process.execPath, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  let rss = 0;
  // Sampled while it runs: the peak resident set size is reported.
  const sampler = setInterval(() => {
    try {
      // A process that is exiting has no VmRSS line any more (NaN): keep the peak seen so far.
      const now = readRss(child.pid!);
      if (Number.isFinite(now)) rss = Math.max(rss, now);
    } catch {
      // exited between two samples
    }
  }, 200);
  child.stdout!.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
  });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => {
      clearInterval(sampler);
      const ms = performance.now() - started;
      if (code === 0) resolve({ stdout, ms, rss });
      else reject(new Error(`${args.join(' ')} exited with ${code}: ${stdout}`));
    });
  });
}

/** What bench/seed.ts reports. */
export interface SeedFigures {
  users: number;
  ms: number;
  usersPerSec: number;
  /** The seeder's RSS when it finished, in bytes. */
  rss: number;
  batchSize: number;
  /** The CLI's own figure, when the CLI did the work. */
  ownMs?: number;
}

/** CPU time (user + system) a process has used so far, in ms, from /proc/<pid>/stat (clock ticks of 10 ms). */
export function readCpuMs(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name, which is in parentheses and may hold spaces: utime and stime are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

export function readRss(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1];
  return kb ? Number(kb) * 1024 : NaN;
}

export interface LoadOptions {
  port: number;
  path: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  connections: number;
  durationSeconds: number;
  warmupSeconds: number;
  /** Hard bound on requests of the measured run (autocannon stops at whichever comes first). */
  maxRequests: number;
  /** HTTPS rather than HTTP (the certificate is not checked). */
  https?: boolean;
  /** The server's process: its CPU time over the measured run is reported per request. */
  cpuPid?: number;
  /** The server's log file: the bytes it grew by over the measured run are reported per request. */
  logFile?: string;
}

export interface LoadFigures {
  reqPerSec: number;
  p50: number;
  p99: number;
  requests: number;
  non2xx: number;
  errors: number;
  seconds: number;
  /** Server CPU (user + system) per request over the measured run, in µs; NaN without cpuPid. */
  cpuUsPerRequest: number;
  /** Bytes of log per request over the measured run; NaN without logFile. */
  logBytesPerRequest: number;
}

function cannon(options: LoadOptions, seconds: number, maxRequests?: number): Promise<autocannon.Result> {
  return autocannon({
    url: `${options.https ? 'https' : 'http'}://${HOST}:${options.port}${options.path}`,
    method: options.method ?? 'GET',
    headers: options.headers,
    body: options.body,
    connections: options.connections,
    duration: seconds,
    // Both bounds hold: the run stops after `seconds` or `maxRequests`, whichever comes first.
    ...(maxRequests ? { maxOverallRequests: maxRequests } : {}),
    timeout: 10,
  });
}

/** A warm-up run whose figures are dropped, then the measured run. */
export async function load(options: LoadOptions): Promise<LoadFigures> {
  if (options.warmupSeconds > 0) await cannon(options, options.warmupSeconds);
  const logSize = () => (options.logFile === undefined ? NaN : fs.statSync(options.logFile).size);
  const cpuBefore = options.cpuPid === undefined ? NaN : readCpuMs(options.cpuPid);
  const logBefore = logSize();
  const r = await cannon(options, options.durationSeconds, options.maxRequests);
  const cpuMs = options.cpuPid === undefined ? NaN : readCpuMs(options.cpuPid) - cpuBefore;
  const logBytes = logSize() - logBefore;
  const seconds = r.duration;
  return {
    reqPerSec: r.requests.total / seconds,
    p50: r.latency.p50,
    p99: r.latency.p99,
    requests: r.requests.total,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
    seconds,
    cpuUsPerRequest: (cpuMs * 1000) / r.requests.total,
    logBytesPerRequest: logBytes / r.requests.total,
  };
}

/** One exchange with the real server, kept so the bare server can answer with the same bytes. */
export interface RecordedResponse {
  status: number;
  headers: Record<string, string>;
  bodyBase64: string;
}

/** Headers node:http writes by itself on every response; the bare server must not send them twice. */
const HOP_HEADERS = new Set(['date', 'connection', 'keep-alive', 'transfer-encoding']);

export async function record(port: number, pathAndQuery: string, init: RequestInit = {}): Promise<RecordedResponse> {
  const response = await fetch(`http://${HOST}:${port}${pathAndQuery}`, init);
  const body = Buffer.from(await response.arrayBuffer());
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    if (!HOP_HEADERS.has(name)) headers[name] = value;
  });
  return { status: response.status, headers, bodyBase64: body.toString('base64') };
}

/** Starts bench/bare.ts answering every request with `response`; over HTTPS with `tls`. */
export async function spawnBare(response: RecordedResponse, dir: string, tls?: TlsFiles): Promise<Child> {
  const file = path.join(dir, `bare-response-${process.pid}-${Date.now()}.json`);
  fs.writeFileSync(file, JSON.stringify(response));
  return spawnChild('bare.ts', [file], tls ? { TLS_CERT_FILE: tls.cert, TLS_KEY_FILE: tls.key } : {});
}

export interface TlsFiles {
  cert: string;
  key: string;
}

/** A self-signed certificate for 127.0.0.1 (ECDSA P-256, openssl), for the HTTPS runs. */
export function selfSignedCertificate(dir: string): TlsFiles {
  const files = { cert: path.join(dir, 'bench-cert.pem'), key: path.join(dir, 'bench-key.pem') };
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-subj',
      `/CN=${HOST}`,
      '-keyout',
      files.key,
      '-out',
      files.cert,
    ],
    { stdio: 'ignore' },
  );
  return files;
}

/** The Node flags of `npm start` (package.json's start script): the benchmarks run the server with them. */
export function startFlags(): string[] {
  const scripts = JSON.parse(fs.readFileSync(path.join(BENCH_DIR, '..', 'package.json'), 'utf8')).scripts as Record<
    string,
    string
  >;
  return scripts.start!.split(' ').filter((word) => word.startsWith('--'));
}

/**
 * Starts bench/server.ts on an existing (or new) DATA_DIR and returns it with its admin token;
 * `env` adds to or overrides serverEnv (DATABASE_URL for PostgreSQL, DELIVERY_* settings…).
 */
export async function spawnServer(
  dataDir: string,
  env: Record<string, string> = {},
  stdoutFile?: string,
): Promise<Child & { port: number; token: string }> {
  // With npm start's Node flags, as operators run it; BENCH_SERVER_NODE_ARGS adds more, for example
  // `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile the servers under load.
  const nodeArgs = [...startFlags(), ...(process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean) ?? [])];
  const child = await spawnChild('server.ts', [], { ...serverEnv(dataDir), ...env }, 600_000, stdoutFile, nodeArgs);
  return Object.assign(child, { port: child.ready.port as number, token: child.ready.token as string });
}

export interface Variant {
  name: string;
  start(): Promise<Child & { port: number }>;
}

export interface RoundFigures extends LoadFigures {
  variant: string;
  round: number;
}

/**
 * Runs the variants in turn, `rounds` times (bare, server, bare, server…); each variant's process is
 * started once and kept for all rounds, so warm-up and caches carry over as they would in production.
 */
export async function interleave(
  variants: Array<{ name: string; child: Child & { port: number } }>,
  rounds: number,
  options: Omit<LoadOptions, 'port'>,
): Promise<RoundFigures[]> {
  const results: RoundFigures[] = [];
  for (let round = 1; round <= rounds; round++) {
    for (const { name, child } of variants) {
      const figures = await load({ ...options, port: child.port, cpuPid: child.pid, logFile: child.logFile });
      results.push({ variant: name, round, ...figures });
      process.stdout.write(
        `    round ${round} ${name}: ${fmt.int(figures.reqPerSec)} req/s, p50 ${figures.p50} ms, p99 ${figures.p99} ms, ${fmt.int(figures.cpuUsPerRequest)} µs CPU/request\n`,
      );
    }
  }
  return results;
}

export function mean(values: number[]): number {
  return values.reduce((a, b) => a + b, 0) / values.length;
}

export const fmt = {
  int: (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : String(n)),
  ms: (n: number) => `${Number.isInteger(n) ? n : n.toFixed(2)} ms`,
  ratio: (n: number) => n.toFixed(2),
  mb: (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MB`,
  s: (ms: number) => `${(ms / 1000).toFixed(1)} s`,
};

/** Prints a Markdown table (it pastes as is into docs/benchmarks.md). */
export function table(title: string, header: string[], rows: Array<Array<string | number>>): void {
  const lines = [
    `\n### ${title}\n`,
    `| ${header.join(' | ')} |`,
    `|${header.map(() => '---').join('|')}|`,
    ...rows.map((row) => `| ${row.join(' | ')} |`),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

/** Rows of an interleaved comparison: every round, the means, and the ratio of the means. */
export function comparisonRows(results: RoundFigures[], baseline: string, measured: string, unit = 'req/s') {
  const rows: Array<Array<string | number>> = results.map((r) => [
    `round ${r.round}`,
    r.variant,
    fmt.int(r.reqPerSec),
    fmt.ms(r.p50),
    fmt.ms(r.p99),
    fmt.int(r.requests),
    r.non2xx,
    r.errors,
    fmt.int(r.cpuUsPerRequest),
  ]);
  const of = (variant: string) => results.filter((r) => r.variant === variant);
  const base = mean(of(baseline).map((r) => r.reqPerSec));
  const meas = mean(of(measured).map((r) => r.reqPerSec));
  for (const variant of [baseline, measured]) {
    const rs = of(variant);
    rows.push([
      '**mean**',
      variant,
      fmt.int(mean(rs.map((r) => r.reqPerSec))),
      fmt.ms(mean(rs.map((r) => r.p50))),
      fmt.ms(mean(rs.map((r) => r.p99))),
      fmt.int(mean(rs.map((r) => r.requests))),
      mean(rs.map((r) => r.non2xx)),
      mean(rs.map((r) => r.errors)),
      fmt.int(mean(rs.map((r) => r.cpuUsPerRequest))),
    ]);
  }
  const cpu = (variant: string) => mean(of(variant).map((r) => r.cpuUsPerRequest));
  return {
    header: ['round', 'variant', unit, 'p50', 'p99', 'requests', 'non-2xx', 'errors', 'server CPU µs/request'],
    rows,
    ratio: meas / base,
    /** Server CPU per request, measured ÷ baseline (means of the rounds). */
    cpuRatio: cpu(measured) / cpu(baseline),
    logBytesPerRequest: mean(of(measured).map((r) => r.logBytesPerRequest)),
    baseline: { reqPerSec: base, p99: mean(of(baseline).map((r) => r.p99)), cpuUsPerRequest: cpu(baseline) },
    measured: { reqPerSec: meas, p99: mean(of(measured).map((r) => r.p99)), cpuUsPerRequest: cpu(measured) },
  };
}

/** "met" / "missed" against a target, for the printed verdicts. */
export const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED');

/** Passed from one benchmark to the next by run.ts: a database already holding generated users. */
export interface BenchContext {
  keepSeeded: boolean;
  seeded?: { dataDir: string; users: number; remove(): void };
}
