import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildDist } from '../../scripts/compile.mjs';

// The checkout's files (test/run.mjs runs the tests from a compiled copy that has no bin/ of its own).
const project = process.env.TEST_PROJECT_ROOT ?? path.resolve(import.meta.dirname, '../..');

/**
 * `npm start` runs bin/tenantry.mjs, which runs the build in dist/ with plain Node. Checked on a copy of
 * the command next to its own build: the sources linked in, the packages of the checkout.
 */
describe('bin/tenantry.mjs runs the compiled build', () => {
  let dir: string;
  const tenantry = (...args: string[]) =>
    spawnSync(process.execPath, [path.join(dir, 'bin', 'tenantry.mjs'), ...args], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '' },
      timeout: 30_000,
    });

  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-bin-'));
    fs.mkdirSync(path.join(dir, 'bin'));
    fs.copyFileSync(path.join(project, 'bin', 'tenantry.mjs'), path.join(dir, 'bin', 'tenantry.mjs'));
    fs.symlinkSync(path.join(project, 'node_modules'), path.join(dir, 'node_modules'));
    fs.writeFileSync(path.join(dir, 'package.json'), '{ "type": "module" }\n');
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('says how to build when dist/ is missing', () => {
    const run = tenantry('help');
    assert.equal(run.status, 1);
    assert.equal(run.stdout, '');
    assert.equal(run.stderr, 'tenantry: dist/ is missing: run `npm run build` (npm ci runs it)\n');
  });

  it('runs dist/ without TypeScript once built, and says so when the sources changed since', async () => {
    fs.cpSync(path.join(project, 'src'), path.join(dir, 'src'), { recursive: true });
    assert.ok((await buildDist(dir)) > 100);
    assert.equal(fs.existsSync(path.join(dir, 'dist', 'cli', 'run.js')), true);
    assert.equal(fs.existsSync(path.join(dir, 'dist', 'cli', 'run.js.map')), true);
    assert.deepEqual(
      fs.readdirSync(path.join(dir, 'dist'), { recursive: true }).filter((f) => String(f).endsWith('.ts')),
      [],
    );

    const run = tenantry('help');
    assert.equal(run.stderr, '');
    assert.equal(run.status, 0);
    assert.match(run.stdout, /^Usage: tenantry <command>/);
    // No tsx in the process: an unknown command fails through the compiled main, as from the sources.
    const unknown = tenantry('nonsense');
    assert.equal(unknown.status, 2);
    assert.equal(unknown.stderr, 'tenantry: unknown command "nonsense" (see: tenantry help)\n');

    const later = new Date(Date.now() + 60_000);
    fs.utimesSync(path.join(dir, 'src', 'config.ts'), later, later);
    const stale = tenantry('help');
    assert.equal(stale.status, 0);
    assert.equal(stale.stderr, 'tenantry: src/ changed since dist/ was built: run `npm run build`\n');
  });
});
