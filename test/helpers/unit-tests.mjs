// Every test file under test/unit/ in this one process (test/run.mjs lists them in
// TENANTRY_UNIT_TEST_FILES). They boot nothing and share no state, so a process each would cost more
// than their tests: loading the TypeScript sources is most of a test process's time.
import path from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';

for (const file of JSON.parse(process.env.TENANTRY_UNIT_TEST_FILES ?? '[]')) {
  try {
    await import(pathToFileURL(file).href);
  } catch (error) {
    // A file that cannot load fails on its own; the others still run.
    test(`loads ${path.relative(process.cwd(), file)}`, () => {
      throw error;
    });
  }
}
