// The package's type declarations: tsc emits dist/**/*.d.ts for the public entry (src/index.ts) and
// what it refers to. Their relative imports name the sources (`./x.ts`); the package ships `./x.js`
// beside `./x.d.ts`, so they are rewritten to `.js`, which every TypeScript resolution mode finds.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const project = path.dirname(path.dirname(new URL(import.meta.url).pathname));
const started = performance.now();
const tsc = path.join(project, 'node_modules', 'typescript', 'bin', 'tsc');
const run = spawnSync(process.execPath, [tsc, '-p', path.join(project, 'tsconfig.build.json')], { stdio: 'inherit' });
if (run.status !== 0) process.exit(run.status ?? 1);
const dist = path.join(project, 'dist');
let files = 0;
for (const file of fs.readdirSync(dist, { recursive: true }).map(String)) {
  if (!file.endsWith('.d.ts')) continue;
  const full = path.join(dist, file);
  const text = fs.readFileSync(full, 'utf8');
  const rewritten = text.replace(/((?:from|import)\s*\(?\s*['"])(\.{1,2}\/[^'"]+)\.ts(['"])/g, '$1$2.js$3');
  if (rewritten !== text) fs.writeFileSync(full, rewritten);
  files++;
}
console.log(`tenantry: wrote ${files} type declarations to dist/ in ${Math.round(performance.now() - started)} ms`);
