/**
 * Fills or times the users table of the default tenant, in its own process, through
 * `services.users.insertMany` (one transaction per batch). Modes:
 *   generate <count> <batch> [from]   insert <count> generated users (lib.ts generatedUser), numbered
 *                                     from `from` (0 unless given: a database grows by a second call)
 *   import <file> <batch>      read an NDJSON file, JSON.parse each line, insert in batches
 *   parse <file> <batch>       the baseline of `import`: the same reading and parsing, no insert
 * Prints PROGRESS lines and, at the end, `READY {"users", "ms", "usersPerSec", "rss"}`; the time
 * excludes opening the database and bootstrapping the tenant.
 */
import fs from 'node:fs';
import readline from 'node:readline';
import { bootstrap, DEFAULT_TENANT_ID } from '../src/bootstrap.ts';
import { loadConfig } from '../src/config.ts';
import type { ImportedUser } from '../src/modules/users/service.ts';
import { createServices, type Services } from '../src/services.ts';
import { generatedUser } from './lib.ts';

const [mode, source, batchArg, fromArg] = process.argv.slice(2);
const from = Number(fromArg ?? 0);
const batchSize = Number(batchArg ?? 5000);
const PROGRESS_EVERY = 250_000;

let services: Services | undefined;
if (mode !== 'parse') {
  services = await createServices(loadConfig(process.env));
  await bootstrap(services);
  // As `tenantry users import` does: the users indexes have random keys, and with SQLite's default
  // 2 MB page cache each insert of a large import reads pages back from disk.
  services.database.sqlite?.pragma('cache_size = -65536');
}
const store = async (batch: ImportedUser[]) => {
  if (services) await services.users.insertMany(DEFAULT_TENANT_ID, batch);
};

const started = performance.now();
let count = 0;
let nextProgress = PROGRESS_EVERY;
const progress = () => {
  if (count < nextProgress) return;
  nextProgress += PROGRESS_EVERY;
  const ms = performance.now() - started;
  process.stdout.write(`PROGRESS ${mode} ${count.toLocaleString('en-US')} users in ${(ms / 1000).toFixed(1)} s\n`);
};

if (mode === 'generate') {
  const total = Number(source);
  while (count < total) {
    const batch: ImportedUser[] = [];
    for (let i = 0; i < batchSize && count + i < total; i++) batch.push(generatedUser(from + count + i));
    await store(batch);
    count += batch.length;
    progress();
  }
} else if (mode === 'import' || mode === 'parse') {
  let batch: ImportedUser[] = [];
  const lines = readline.createInterface({
    input: fs.createReadStream(source!, { highWaterMark: 1 << 20 }),
    crlfDelay: Infinity,
  });
  for await (const line of lines) {
    if (line === '') continue;
    batch.push(JSON.parse(line) as ImportedUser);
    if (batch.length === batchSize) {
      await store(batch);
      count += batch.length;
      batch = [];
      progress();
    }
  }
  if (batch.length > 0) {
    await store(batch);
    count += batch.length;
  }
} else {
  throw new Error(`unknown mode ${mode}: generate <count> <batch> | import <file> <batch> | parse <file> <batch>`);
}

const ms = performance.now() - started;
const rss = process.memoryUsage().rss;
await services?.close();
process.stdout.write(
  `READY ${JSON.stringify({ users: count, ms, usersPerSec: (count / ms) * 1000, rss, batchSize })}\n`,
);
