import fs from 'node:fs';
import { gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/**
 * Where `npm run build` (and so `npm ci`) writes the console's assets: dist/console/ of the project,
 * reached the same way from src/http/ (development, tests) and dist/http/ (the compiled server).
 */
const ASSETS = new URL('../../dist/console/', import.meta.url);

const FILES = {
  'index.html': 'text/html; charset=utf-8',
  'console.js': 'text/javascript; charset=utf-8',
  'console.css': 'text/css; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
} as const;
type AssetName = keyof typeof FILES;

interface Asset {
  type: string;
  body: Buffer;
  gzipped: Buffer;
}

/**
 * Only the page's own files, from its own origin: no inline script or style (the page has none), no
 * plugins, no framing, no form posting anywhere, and API calls to this origin only.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

function load(): Map<AssetName, Asset> | undefined {
  const assets = new Map<AssetName, Asset>();
  for (const [name, type] of Object.entries(FILES) as Array<[AssetName, string]>) {
    const file = new URL(name, ASSETS);
    if (!fs.existsSync(file)) return undefined;
    const body = fs.readFileSync(file);
    assets.set(name, { type, body, gzipped: gzipSync(body, { level: 9 }) });
  }
  return assets;
}

/**
 * The console at /console: four static files read once at start (compressed once too), served to
 * anyone, the same on every host — like /docs, its routes are public and tenantless. The page holds no
 * data: everything it shows it fetches from the Management API with the token of the client that
 * signed in, through the same authenticated, scoped routes as any other client.
 */
export function registerConsole(app: FastifyInstance): void {
  const assets = load();
  const config = { public: true, tenantless: true } as const;
  const send = (name: AssetName) => async (request: FastifyRequest, reply: FastifyReply) => {
    reply
      .header('content-security-policy', CONSOLE_CSP)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('x-frame-options', 'DENY')
      .header('cross-origin-opener-policy', 'same-origin')
      .header('cache-control', 'no-cache');
    const asset = assets?.get(name);
    if (!asset) {
      return reply
        .code(503)
        .type('text/plain; charset=utf-8')
        .send('The console is not built: run `npm run build` (npm ci does).\n');
    }
    reply.type(asset.type).header('vary', 'accept-encoding');
    if (acceptsGzip(request.headers['accept-encoding'])) {
      return reply.header('content-encoding', 'gzip').send(asset.gzipped);
    }
    return reply.send(asset.body);
  };
  app.get('/console', { config, schema: { hide: true } }, send('index.html'));
  app.get('/console/console.js', { config, schema: { hide: true } }, send('console.js'));
  app.get('/console/console.css', { config, schema: { hide: true } }, send('console.css'));
  app.get('/console/favicon.svg', { config, schema: { hide: true } }, send('favicon.svg'));
}

/**
 * Whether an Accept-Encoding header admits gzip (RFC 9110 §12.5.3): `gzip` or `x-gzip` with a weight
 * above 0, or else `*` with one; `gzip;q=0` refuses it, whatever `*` says.
 */
function acceptsGzip(header: string | undefined): boolean {
  if (header === undefined) return false;
  let wildcard: boolean | undefined;
  for (const member of header.split(',')) {
    const [coding = '', ...parameters] = member.split(';').map((part) => part.trim().toLowerCase());
    const q = parameters.find((p) => /^q\s*=/.test(p));
    const weight = q === undefined ? 1 : Number(q.replace(/^q\s*=\s*/, ''));
    const accepted = Number.isFinite(weight) && weight > 0;
    if (coding === 'gzip' || coding === 'x-gzip') return accepted;
    if (coding === '*') wildcard = accepted;
  }
  return wildcard ?? false;
}
