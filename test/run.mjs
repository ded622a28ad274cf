// Runs every test file under test/ with Node's test runner. Files are listed explicitly because
// `node --test` given no list can run zero tests and still exit 0.
//
// The tests run on the project compiled once (scripts/compile.mjs: src/, test/, chaos/, scripts/, file for
// file, into node_modules/.cache/tenantry/test-tree-<pid>/): loading the sources through tsx in every test
// process, every server a test spawns and every render thread was most of the suite's CPU time.
// TEST_TSX=1 runs the TypeScript sources through tsx instead, as `node --import tsx --test FILE` does
// (the command-line processes they spawn then run dist/, which it builds first).
//
// Each file runs in a process of its own, except those under test/unit/: they boot nothing, and run
// together in one process (test/helpers/unit-tests.mjs), since a process costs more than their tests.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildDist, compile } from '../scripts/compile.mjs';

const testDir = path.dirname(new URL(import.meta.url).pathname);
const project = path.dirname(testDir);
const only = process.argv.slice(2);
const files = fs
  .readdirSync(testDir, { recursive: true })
  .map(String)
  .filter((f) => f.endsWith('.test.ts'))
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .sort();
if (files.length === 0) {
  console.error('no test files found');
  process.exit(1);
}

const sources = process.env.TEST_TSX === '1';
// Where the tests run from: the project itself, or the compiled tree, which mirrors it (a test that
// spawns `bin/tenantry.mjs` gets the tree's, running the same compiled code).
// A tree per run, so that runs side by side do not rebuild each other's; a tree whose run is gone
// (killed before it could remove it) is removed by the next run.
const trees = path.join(project, 'node_modules', '.cache', 'tenantry');
const cwd = sources ? project : path.join(trees, `test-tree-${process.pid}`);
for (const name of fs.existsSync(trees) ? fs.readdirSync(trees) : []) {
  const pid = Number(/^test-tree-(\d+)$/.exec(name)?.[1]);
  if (Number.isInteger(pid) && !isRunning(pid)) fs.rmSync(path.join(trees, name), { recursive: true, force: true });
}
if (sources) {
  // The processes the tests spawn run bin/tenantry.mjs, which runs dist/: built afresh.
  await buildDist(project);
} else {
  await compile({ root: project, dirs: ['src', 'test', 'chaos', 'scripts'], outDir: cwd });
  fs.mkdirSync(path.join(cwd, 'bin'));
  fs.writeFileSync(path.join(cwd, 'bin', 'tenantry.mjs'), "import '../src/cli/run.js';\n");
}
const compiled = (f) => (sources ? f : f.replace(/\.ts$/, '.js'));

// The run ends no sooner than its longest file, so the longest start first (as the timing reporter's
// list of slowest files showed them; the order changes nothing else).
const LONGEST = [
  'package/pack.test.ts',
  'fuzz.test.ts',
  'modules/event-streams/durability.test.ts',
  'modules/event-streams/deliveries.test.ts',
  'modules/oauth/access-tokens-cache.test.ts',
  'chaos.test.ts',
  'cli/main.test.ts',
  'modules/event-streams/delivery/fairness.test.ts',
  'modules/custom-domains/rechecks.test.ts',
  'serve.test.ts',
  'modules/custom-domains/certificates.test.ts',
  'modules/event-streams/delivery/try-later.test.ts',
  'modules/email-templates/renderer.test.ts',
];
const rank = (f) => (LONGEST.includes(f) ? LONGEST.indexOf(f) : LONGEST.length);
files.sort((a, b) => rank(a) - rank(b));

const isUnit = (f) => f.startsWith(`unit${path.sep}`);
const unit = files.filter(isUnit).map((f) => path.join(cwd, 'test', compiled(f)));
const separate = files.filter((f) => !isUnit(f)).map((f) => path.join('test', compiled(f)));
// Two files per core: most files spend much of their time waiting (on a cache's expiry, a retry, a
// child process, the database's own process). More only stretches the CPU-bound ones (TEST_CONCURRENCY).
const concurrency = process.env.TEST_CONCURRENCY ?? String(2 * os.availableParallelism());
const result = spawnSync(
  process.execPath,
  [
    ...(sources ? ['--import', 'tsx'] : ['--enable-source-maps']),
    '--test',
    `--test-concurrency=${concurrency}`,
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    `--test-reporter=${path.join(testDir, 'helpers', 'timing-reporter.mjs')}`,
    '--test-reporter-destination=stdout',
    ...(unit.length > 0 ? [path.join(testDir, 'helpers', 'unit-tests.mjs')] : []),
    ...separate,
  ],
  {
    cwd,
    stdio: 'inherit',
    env: {
      ...process.env,
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
      TENANTRY_UNIT_TEST_FILES: JSON.stringify(unit),
      // The checkout, for the tests that read the sources themselves (the lint rules' test).
      TEST_PROJECT_ROOT: project,
    },
  },
);
if (!sources) fs.rmSync(cwd, { recursive: true, force: true });
process.exit(result.status ?? 1);

function isRunning(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}
