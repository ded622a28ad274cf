// `npm run build` (and `npm ci`, through the `prepare` script): the server compiled to JavaScript in
// dist/, file for file, which `bin/tenantry.mjs` runs with plain Node. Source maps sit beside the files,
// so a logged stack names the TypeScript source.
import path from 'node:path';
import { buildDist } from './compile.mjs';

const started = performance.now();
const files = await buildDist(path.dirname(path.dirname(new URL(import.meta.url).pathname)));
console.log(`tenantry: compiled ${files} files to dist/ in ${Math.round(performance.now() - started)} ms`);
