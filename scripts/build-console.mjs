// The console's assets: console/ (plain TypeScript and DOM, no framework) bundled and minified by
// esbuild into dist/console/, which the server reads at start and serves at /console. Everything the
// page loads comes from there: no CDN, nothing fetched at run time.
import fs from 'node:fs';
import path from 'node:path';
import * as esbuild from 'esbuild';

/** Builds console/ into dist/console/ (or `outDir`); returns each asset's size in bytes. */
export async function buildConsole(project, outDir = path.join(project, 'dist', 'console')) {
  const source = path.join(project, 'console');
  fs.rmSync(outDir, { recursive: true, force: true });
  fs.mkdirSync(outDir, { recursive: true });
  await esbuild.build({
    entryPoints: [path.join(source, 'src', 'main.ts')],
    outfile: path.join(outDir, 'console.js'),
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    target: ['chrome110', 'firefox110', 'safari16'],
    legalComments: 'none',
    logLevel: 'warning',
  });
  await esbuild.build({
    entryPoints: [path.join(source, 'console.css')],
    outfile: path.join(outDir, 'console.css'),
    minify: true,
    logLevel: 'warning',
  });
  for (const file of ['index.html', 'favicon.svg']) fs.copyFileSync(path.join(source, file), path.join(outDir, file));
  return Object.fromEntries(fs.readdirSync(outDir).map((file) => [file, fs.statSync(path.join(outDir, file)).size]));
}
