// Runs every test file under test/ with Node's test runner. Files are listed explicitly because
// `node --test` given no list can run zero tests and still exit 0.
//
// Each file runs in a process of its own, except those under test/unit/: they boot nothing, and run
// together in one process (test/helpers/unit-tests.mjs), since loading the sources costs a process
// more than their tests do.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const root = path.dirname(new URL(import.meta.url).pathname);
const only = process.argv.slice(2);
const files = fs
  .readdirSync(root, { recursive: true })
  .map(String)
  .filter((f) => f.endsWith('.test.ts'))
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .sort();
if (files.length === 0) {
  console.error('no test files found');
  process.exit(1);
}
const isUnit = (f) => f.startsWith(`unit${path.sep}`);
const unit = files.filter(isUnit).map((f) => path.join(root, f));
const separate = files.filter((f) => !isUnit(f)).map((f) => path.join('test', f));
const result = spawnSync(
  process.execPath,
  [
    '--import',
    'tsx',
    '--test',
    '--test-concurrency=2',
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    `--test-reporter=${path.join(root, 'helpers', 'timing-reporter.mjs')}`,
    '--test-reporter-destination=stdout',
    ...(unit.length > 0 ? [path.join('test', 'helpers', 'unit-tests.mjs')] : []),
    ...separate,
  ],
  {
    stdio: 'inherit',
    env: {
      ...process.env,
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
      TENANTRY_UNIT_TEST_FILES: JSON.stringify(unit),
    },
  },
);
process.exit(result.status ?? 1);
