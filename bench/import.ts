/**
 * import: users stored per second for 1,000,000 generated users read from an NDJSON file, by
 * `tenantry users import` run as a child process (timed from spawn to exit, CLI start-up included),
 * or, where the CLI lacks the command, by bench/seed.ts calling `services.users.insertMany` in
 * batches. Baseline: a child merely reading and JSON.parse-ing the same file.
 */
import fs from 'node:fs';
import path from 'node:path';
import { once } from 'node:events';
import {
  BENCH_DIR,
  fmt,
  generatedUser,
  runChild,
  runCommand,
  serverEnv,
  table,
  tempDir,
  verdict,
  type BenchContext,
  type SeedFigures,
} from './lib.ts';

export const USERS = Number(process.env.BENCH_IMPORT_USERS ?? 1_000_000);
const BATCH = Number(process.env.BENCH_BATCH ?? 5000);

export async function writeNdjson(file: string, count: number): Promise<number> {
  const out = fs.createWriteStream(file);
  let chunk = '';
  for (let i = 0; i < count; i++) {
    chunk += `${JSON.stringify(generatedUser(i))}\n`;
    if (chunk.length > 1 << 20) {
      if (!out.write(chunk)) await once(out, 'drain');
      chunk = '';
    }
  }
  out.end(chunk);
  await once(out, 'finish');
  return fs.statSync(file).size;
}

const CLI_IMPORT = path.join(BENCH_DIR, '..', 'src', 'cli', 'users-import.ts');

/** The CLI as an operator runs it, on a database where the default tenant exists (bootstrapped by seed.ts). */
async function cliImport(file: string, env: Record<string, string>): Promise<SeedFigures> {
  await runChild('seed.ts', ['generate', '0'], env);
  const cli = path.join(BENCH_DIR, '..', 'bin', 'tenantry.mjs');
  const { stdout, ms, rss } = await runCommand([cli, 'users', 'import', '--file', file, '--batch', String(BATCH)], env);
  process.stdout.write(`    cli: ${stdout.trim()}\n`);
  const users = Number(/Imported (\d+) users/.exec(stdout)?.[1] ?? NaN);
  const ownSeconds = Number(/in ([\d.]+) s/.exec(stdout)?.[1] ?? NaN);
  return { users, ms, usersPerSec: (users / ms) * 1000, rss, batchSize: BATCH, ownMs: ownSeconds * 1000 };
}

export async function run(context: BenchContext): Promise<void> {
  const work = tempDir('import');
  const file = path.join(work.dir, 'users.ndjson');
  const dataDir = path.join(work.dir, 'data');
  try {
    process.stdout.write(`  writing ${fmt.int(USERS)} users to ${file}\n`);
    const writeStart = performance.now();
    const bytes = await writeNdjson(file, USERS);
    process.stdout.write(`  wrote ${fmt.mb(bytes)} in ${fmt.s(performance.now() - writeStart)}\n`);

    const env = serverEnv(dataDir);
    const parse = await runChild('seed.ts', ['parse', file, String(BATCH)], env);
    const stored = fs.existsSync(CLI_IMPORT)
      ? await cliImport(file, env)
      : await runChild('seed.ts', ['import', file, String(BATCH)], env);
    const how = fs.existsSync(CLI_IMPORT)
      ? `tenantry users import --batch ${BATCH}`
      : `insertMany, batches of ${BATCH}`;
    const dbBytes = fs
      .readdirSync(dataDir)
      .filter((f) => f.startsWith('tenantry.sqlite'))
      .reduce((sum, f) => sum + fs.statSync(path.join(dataDir, f)).size, 0);

    const row = (name: string, r: SeedFigures) => [
      name,
      fmt.int(r.users),
      fmt.s(r.ms),
      fmt.int(r.usersPerSec),
      fmt.mb(r.rss),
    ];
    table(
      `import — ${fmt.int(USERS)} users, NDJSON ${fmt.mb(bytes)}, ${how}, SQLite`,
      ['variant', 'users', 'time', 'users/s', 'child RSS (peak for the CLI, at end otherwise)'],
      [
        row('baseline: read + JSON.parse', parse),
        row(`import: ${how}`, stored),
        // The CLI's own timing leaves out its start-up (tsx, opening the database).
        ...(stored.ownMs
          ? [
              row('  (the same, as the CLI times itself)', {
                ...stored,
                ms: stored.ownMs,
                usersPerSec: (stored.users / stored.ownMs) * 1000,
              }),
            ]
          : []),
      ],
    );
    const ratio = stored.usersPerSec / parse.usersPerSec;
    process.stdout.write(
      `\n  ratio import/baseline (users/s): ${fmt.ratio(ratio)}; database on disk ${fmt.mb(dbBytes)}\n`,
    );
    process.stdout.write(
      `  target 1,000,000 users in < 60 s: ${verdict(stored.ms < 60_000 * (USERS / 1_000_000))} (${fmt.s(stored.ms)} wall)\n`,
    );
    // The next benchmark (users-by-email) can serve this database instead of seeding its own.
    if (context.keepSeeded && stored.users === USERS) {
      context.seeded = { dataDir, users: USERS, remove: work.remove };
      fs.rmSync(file);
      return;
    }
    work.remove();
  } catch (error) {
    work.remove();
    throw error;
  }
}
