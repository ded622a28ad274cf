#!/usr/bin/env node
// The `tenantry` command: the server compiled to JavaScript in dist/ (`npm ci` builds it through the
// `prepare` script, `npm run build` rebuilds it), run by plain Node with no TypeScript compiler.
import fs from 'node:fs';

const entry = new URL('../dist/cli/run.js', import.meta.url);
if (!fs.existsSync(entry)) {
  process.stderr.write('tenantry: dist/ is missing: run `npm run build` (npm ci runs it)\n');
  process.exit(1);
}
// In a checkout, sources changed since the build would silently not run: say so.
const sources = new URL('../src/', import.meta.url);
if (fs.existsSync(sources)) {
  const built = fs.statSync(entry).mtimeMs;
  const changed = fs
    .readdirSync(sources, { recursive: true })
    .some((file) => fs.statSync(new URL(file, sources)).mtimeMs > built);
  if (changed) process.stderr.write('tenantry: src/ changed since dist/ was built: run `npm run build`\n');
}
process.setSourceMapsEnabled(true);
await import(entry.href);
