import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ESLint } from 'eslint';

// The checkout (test/run.mjs runs the tests from a compiled copy of it, which holds no sources).
const root = process.env.TEST_PROJECT_ROOT ?? path.resolve(import.meta.dirname, '../../..');
const eslint = new ESLint({ cwd: root });

/** The rule ids the project's lint configuration reports for `code` placed at `file`. */
async function problems(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(root, file) });
  return result!.messages.map((message) => `${message.ruleId}: ${message.message}`);
}

describe('import boundaries (eslint/boundaries.js)', () => {
  it("refuses a module importing another module's store, and allows its own", async () => {
    const foreign = await problems(
      'src/modules/users/service.ts',
      "export { SegmentStore } from '../segments/store.ts';\n",
    );
    assert.equal(foreign.length, 1);
    assert.match(foreign[0]!, /^tenantry\/boundaries: .*src\/modules\/segments\/store\.ts, another module's store/);
    assert.deepEqual(await problems('src/modules/users/service.ts', "export { UserStore } from './store.ts';\n"), []);
    const nested = await problems(
      'src/modules/event-streams/delivery/worker.ts',
      "export * from '../store/claim.ts';\n",
    );
    assert.deepEqual(nested, []);
    assert.equal((await problems('src/cli/mailbox.ts', "export * from '../mail/store.ts';\n")).length, 1);
  });

  it('lets the composition root build stores', async () => {
    assert.deepEqual(await problems('src/services.ts', "export { UserStore } from './modules/users/store.ts';\n"), []);
  });

  it('keeps Kysely, the schema and the SQL helpers inside stores and src/db/', async () => {
    const service = 'src/modules/users/service.ts';
    assert.match((await problems(service, "export { sql } from 'kysely';\n"))[0]!, /imports kysely/);
    assert.match(
      (await problems(service, "export type { Schema } from '../../db/schema.ts';\n"))[0]!,
      /src\/db\/schema\.ts/,
    );
    assert.equal((await problems(service, "export { uniqueOr } from '../../db/database.ts';\n")).length, 1);
    assert.deepEqual(await problems(service, "export { transaction, type Tx } from '../../db/database.ts';\n"), []);
    assert.deepEqual(
      await problems(
        'src/modules/users/store.ts',
        "export { sql } from 'kysely';\nexport { uniqueOr } from '../../db/database.ts';\n",
      ),
      [],
    );
  });

  it('refuses API errors made outside the catalogue and console output outside the CLI', async () => {
    const code = "import { ApiError } from '../../http/errors.ts';\nexport const e = () => new ApiError(400, 'x');\n";
    assert.match((await problems('src/modules/users/service.ts', code))[0]!, /named factory of src\/http\/errors\.ts/);
    assert.match((await problems('src/mail/worker.ts', "console.error('x');\n"))[0]!, /server's logger/);
    assert.deepEqual(await problems('src/cli/mailbox.ts', "console.error('x');\n"), []);
  });
});

/** Every import between files of src/ (type-only ones too), as a graph of repository-relative paths. */
function importGraph(): Map<string, string[]> {
  const files = fs
    .readdirSync(path.join(root, 'src'), { recursive: true })
    .map(String)
    .filter((file) => file.endsWith('.ts'))
    .map((file) => path.join('src', file));
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const text = fs.readFileSync(path.join(root, file), 'utf8');
    const targets = [...text.matchAll(/^(?:import|export)\s[^;]*?from\s+'(\.[^']+)'/gms)].map((match) =>
      path.normalize(path.join(path.dirname(file), match[1]!)),
    );
    graph.set(
      file,
      targets.filter((target) => known.has(target)),
    );
  }
  return graph;
}

describe('import graph of src/', () => {
  it('has no cycle, so every module reads from its dependencies up', () => {
    const graph = importGraph();
    assert.ok(graph.size > 100, `only ${graph.size} files found`);
    const cycles: string[] = [];
    const onPath: string[] = [];
    const done = new Set<string>();
    const visit = (file: string) => {
      const at = onPath.indexOf(file);
      if (at >= 0) return void cycles.push([...onPath.slice(at), file].join(' -> '));
      if (done.has(file)) return;
      onPath.push(file);
      for (const target of graph.get(file) ?? []) visit(target);
      onPath.pop();
      done.add(file);
    };
    for (const file of graph.keys()) visit(file);
    assert.deepEqual(cycles, []);
  });
});
