import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

/**
 * The checkout this test belongs to: the tests run from a compiled copy under node_modules/.cache
 * (see test/run.mjs), so the package is found by walking up to its package.json.
 */
function projectRoot(): string {
  let dir = import.meta.dirname;
  for (;;) {
    const manifest = path.join(dir, 'package.json');
    if (
      fs.existsSync(manifest) &&
      (JSON.parse(fs.readFileSync(manifest, 'utf8')) as { name?: string }).name === 'tenantry'
    )
      return dir;
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('the tenantry checkout was not found');
    dir = parent;
  }
}

/** The environment of a process of its own: not this test's child (node:test reports through NODE_TEST_CONTEXT). */
function consumerEnv(): NodeJS.ProcessEnv {
  const { NODE_TEST_CONTEXT: _context, NODE_OPTIONS: _options, ...env } = process.env;
  return env;
}

function run(command: string, args: string[], cwd: string, timeout = 120_000): string {
  const result = spawnSync(command, args, {
    cwd,
    encoding: 'utf8',
    timeout,
    env: consumerEnv(),
  });
  assert.equal(result.status, 0, `${command} ${args.join(' ')}:\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

const CONSUMER_TEST = `import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { ManagementClient } from 'auth0';
import { createTenantry } from 'tenantry';

let t;
before(async () => {
  t = await createTenantry({
    seed: { tenants: [{ id: 'default', users: [{ email: 'jane@example.com', password: 'correct horse battery' }] }] },
  });
});
after(() => t.close());

it('drives the packed server through the official SDK', async () => {
  const sdk = new ManagementClient({ domain: new URL(t.url).host, clientId: t.clientId, clientSecret: t.clientSecret });
  assert.equal((await sdk.users.listUsersByEmail({ email: 'jane@example.com' })).length, 1);
  await sdk.users.create({ connection: 'Username-Password-Authentication', email: 'new@example.com', password: 'correct horse battery' });
  await t.reset();
  assert.deepEqual(await sdk.users.listUsersByEmail({ email: 'new@example.com' }), []);
});
`;

// The same through Vitest, as its users write it: one server for the file, a reset before each test.
const CONSUMER_VITEST = `import { afterAll, beforeAll, beforeEach, expect, test } from 'vitest';
import { ManagementClient } from 'auth0';
import { createTenantry } from 'tenantry';

let t;
let sdk;
beforeAll(async () => {
  t = await createTenantry({ seed: { tenants: [{ id: 'default' }] } });
  sdk = new ManagementClient({ domain: new URL(t.url).host, clientId: t.clientId, clientSecret: t.clientSecret });
});
afterAll(() => t.close());
beforeEach(() => t.reset());

test('a user one test creates', async () => {
  await sdk.users.create({ connection: 'Username-Password-Authentication', email: 'new@example.com', password: 'correct horse battery' });
  expect(await sdk.users.listUsersByEmail({ email: 'new@example.com' })).toHaveLength(1);
});

test('is gone in the next', async () => {
  expect(await sdk.users.listUsersByEmail({ email: 'new@example.com' })).toEqual([]);
});
`;

// The consumer's TypeScript: the package's declarations must resolve and type these calls.
const CONSUMER_TYPES = `import { createTenantry, type Tenantry, type Seed } from 'tenantry';
const seed: Seed = { tenants: [{ id: 'default', clients: [{ name: 'ci', scopes: 'all' }] }] };
const t: Tenantry = await createTenantry({ seed, database: 'memory', https: true });
const token: string = await t.token(['read:users']);
const snapshot = await t.snapshot();
await t.restore(snapshot);
// @ts-expect-error: restore takes a snapshot
await t.restore('not a snapshot');
void token;
`;

describe('the npm package: packed, installed into another project, used without a build', () => {
  const project = projectRoot();
  let work: string;
  let consumer: string;
  let tarball: string;
  before(() => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-pack-test-'));
    consumer = path.join(work, 'app');
    fs.mkdirSync(consumer);
  });
  after(() => fs.rmSync(work, { recursive: true, force: true }));

  it('packs dist/ and the command, and no sources, tests or benchmarks', () => {
    const out = run('npm', ['pack', '--json', '--pack-destination', work], project, 180_000);
    const [packed] = JSON.parse(out.slice(out.indexOf('['))) as Array<{
      filename: string;
      files: Array<{ path: string }>;
    }>;
    tarball = path.join(work, packed!.filename);
    const files = packed!.files.map((f) => f.path);
    for (const needed of [
      'package.json',
      'README.md',
      'bin/tenantry.mjs',
      'dist/index.js',
      'dist/index.d.ts',
      'dist/cli/run.js',
    ])
      assert.ok(files.includes(needed), `${needed} is packed`);
    const stray = files.filter((f) => !/^(package\.json|README\.md|LICENSE|bin\/tenantry\.mjs|dist\/.*)$/.test(f));
    assert.deepEqual(stray, []);
    assert.equal(
      files.some((f) => /\.test\.|^test\/|^bench\/|^src\/|^chaos\//.test(f)),
      false,
    );
    assert.equal(
      files.some(
        (f) => f.endsWith('.d.ts') && fs.readFileSync(path.join(project, f), 'utf8').match(/from '\.[^']*\.ts'/),
      ),
      false,
    );
  });

  it('installs from the tarball and runs a node:test and a Vitest suite through the official SDK, and its types check', () => {
    fs.writeFileSync(
      path.join(consumer, 'package.json'),
      '{ "name": "consumer", "private": true, "type": "module" }\n',
    );
    // From the warm npm cache. Install scripts are skipped and better-sqlite3's native addon is taken from
    // this checkout: compiling it is not what this test is about, and would take minutes.
    run(
      'npm',
      ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', tarball, 'auth0@7.1.0'],
      consumer,
      180_000,
    );
    fs.cpSync(
      path.join(project, 'node_modules/better-sqlite3/build'),
      path.join(consumer, 'node_modules/better-sqlite3/build'),
      {
        recursive: true,
      },
    );
    fs.writeFileSync(path.join(consumer, 'sdk.test.mjs'), CONSUMER_TEST);
    const tested = run(process.execPath, ['--test', 'sdk.test.mjs'], consumer);
    assert.match(tested, /# pass 1/);
    assert.match(tested, /# fail 0/);

    // Vitest is this checkout's (a devDependency), linked in rather than downloaded by the test.
    fs.symlinkSync(path.join(project, 'node_modules/vitest'), path.join(consumer, 'node_modules/vitest'));
    fs.writeFileSync(path.join(consumer, 'sdk.vitest.test.mjs'), CONSUMER_VITEST);
    const vitest = run(
      process.execPath,
      [path.join(project, 'node_modules/vitest/vitest.mjs'), 'run', 'sdk.vitest', '--reporter=verbose'],
      consumer,
    );
    // Vitest colours its summary.
    assert.match(vitest.replace(/\x1B\[[0-9;]*m/g, ''), /Tests\s+2 passed \(2\)/);

    const help = run(path.join(consumer, 'node_modules/.bin/tenantry'), ['help'], consumer);
    assert.match(help, /Usage: tenantry <command>/);

    fs.writeFileSync(path.join(consumer, 'types.ts'), CONSUMER_TYPES);
    fs.writeFileSync(
      path.join(consumer, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          types: [],
        },
        files: ['types.ts'],
      }),
    );
    run(process.execPath, [path.join(project, 'node_modules/typescript/bin/tsc'), '-p', consumer], consumer);
    // The check is able to fail: a wrong call is refused.
    fs.writeFileSync(
      path.join(consumer, 'types.ts'),
      `import { createTenantry } from 'tenantry';\nawait createTenantry({ port: 'eighty' });\n`,
    );
    const refused = spawnSync(
      process.execPath,
      [path.join(project, 'node_modules/typescript/bin/tsc'), '-p', consumer],
      {
        cwd: consumer,
        encoding: 'utf8',
      },
    );
    assert.notEqual(refused.status, 0);
    assert.match(refused.stdout, /types\.ts\(2,24\): error TS2322/);
  });
});
