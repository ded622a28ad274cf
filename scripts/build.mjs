// `npm run build` (and `npm ci`, through the `prepare` script): the server compiled to JavaScript in
// dist/, file for file, which `bin/tenantry.mjs` runs with plain Node. Source maps sit beside the files,
// so a logged stack names the TypeScript source. Then the console's assets, into dist/console/ (after
// the server's compile, which empties dist/ first).
//
// With --types, and whenever npm packs the package (`npm pack`/`npm publish` run `prepare` after
// `prepack`, so the declarations must be written here, after dist/ is rebuilt), the public entry's
// type declarations too (scripts/build-types.mjs, a tsc run of several seconds `npm ci` does not need).
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { buildDist } from './compile.mjs';
import { buildConsole } from './build-console.mjs';

const project = path.dirname(path.dirname(new URL(import.meta.url).pathname));
const started = performance.now();
const files = await buildDist(project);
const assets = await buildConsole(project);
const bytes = Object.values(assets).reduce((sum, size) => sum + size, 0);
console.log(
  `tenantry: compiled ${files} files to dist/ and the console (${bytes} bytes) in ${Math.round(performance.now() - started)} ms`,
);
const packing = ['pack', 'publish'].includes(process.env.npm_command ?? '');
if (process.argv.includes('--types') || packing) {
  const types = spawnSync(process.execPath, [path.join(project, 'scripts', 'build-types.mjs')], { stdio: 'inherit' });
  if (types.status !== 0) process.exit(types.status ?? 1);
}
