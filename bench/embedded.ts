/**
 * The embedded server, as a test suite uses it: createTenantry() in memory over HTTPS (the package's
 * build, dist/index.js), timed from the call to a resolved instance; then close(). The first start of the
 * process also creates the development CA, so it is shown apart. Then reset(), snapshot() and restore()
 * on an instance holding the default tenant plus 100 users created through the API, with one user added
 * between two resets (the state a test leaves behind).
 */
import path from 'node:path';
import { buildDist } from '../scripts/compile.mjs';
import { BENCH_DIR, fmt, table } from './lib.ts';

const STARTS = 10;
const RESETS = 50;
const USERS = 100;

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const max = (values: number[]) => Math.max(...values);

async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

export async function run(): Promise<void> {
  const project = path.dirname(BENCH_DIR);
  await buildDist(project);
  const importStarted = performance.now();
  const { createTenantry } = (await import(path.join(project, 'dist/index.js'))) as typeof import('../src/index.ts');
  const importMs = performance.now() - importStarted;

  let first!: Awaited<ReturnType<typeof createTenantry>>;
  const firstMs = await timed(async () => (first = await createTenantry()));
  await first.close();
  const starts: number[] = [];
  for (let i = 0; i < STARTS; i++) {
    let t!: Awaited<ReturnType<typeof createTenantry>>;
    starts.push(await timed(async () => (t = await createTenantry())));
    await t.close();
  }

  const t = await createTenantry();
  const token = await t.token();
  const createUser = (i: number) =>
    fetch(`${t.url}/api/v2/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        connection: 'Username-Password-Authentication',
        email: `u${i}@example.com`,
        password: 'correct horse battery',
      }),
    });
  for (let i = 0; i < USERS; i++) await createUser(i);
  const snapshotMs: number[] = [];
  let saved!: Awaited<ReturnType<typeof t.snapshot>>;
  for (let i = 0; i < RESETS; i++) snapshotMs.push(await timed(async () => (saved = await t.snapshot())));
  const restoreMs: number[] = [];
  for (let i = 0; i < RESETS; i++) restoreMs.push(await timed(() => t.restore(saved)));
  const resetMs: number[] = [];
  for (let i = 0; i < RESETS; i++) {
    await createUser(USERS + i);
    resetMs.push(await timed(() => t.reset()));
  }
  await t.close();

  table(
    'createTenantry() in memory, HTTPS',
    ['step', 'median', 'max', 'runs'],
    [
      ['import dist/index.js', fmt.ms(Math.round(importMs)), '', 1],
      ['first start of the process (creates the development CA)', fmt.ms(Math.round(firstMs)), '', 1],
      ['start', fmt.ms(Math.round(median(starts))), fmt.ms(Math.round(max(starts))), STARTS],
      [
        `snapshot() (default tenant + ${USERS} users)`,
        fmt.ms(Math.round(median(snapshotMs) * 10) / 10),
        fmt.ms(Math.round(max(snapshotMs) * 10) / 10),
        RESETS,
      ],
      [
        `restore() to it`,
        fmt.ms(Math.round(median(restoreMs) * 10) / 10),
        fmt.ms(Math.round(max(restoreMs) * 10) / 10),
        RESETS,
      ],
      [
        'reset() after one user added',
        fmt.ms(Math.round(median(resetMs) * 10) / 10),
        fmt.ms(Math.round(max(resetMs) * 10) / 10),
        RESETS,
      ],
    ],
  );
}
