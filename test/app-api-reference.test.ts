import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import tls from 'node:tls';
import { promisify } from 'node:util';
import Fastify from 'fastify';
import { registerApiReference } from '../src/http/api-reference.ts';
import { dropStalledResponses } from '../src/http/stalled-responses.ts';
import { createCertificateAuthority, issueServerCertificate } from '../src/tls/dev-ca.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';

const run = promisify(execFile);
const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));

/** What the assertions read of a JSON schema in the OpenAPI document. */
interface Schema {
  additionalProperties?: boolean;
  properties?: Record<string, Schema>;
  anyOf?: Array<{ const?: string; enum?: string[] }>;
}

describe('OpenAPI document and the API reference page', () => {
  let server: TestServer;
  let base: string;
  before(async () => {
    server = await startTestServer('sqlite');
    await server.app.listen({ port: 0, host: '127.0.0.1' });
    const address = server.app.server.address();
    assert.ok(address && typeof address === 'object');
    base = `http://127.0.0.1:${address.port}`;
  });
  after(() => server.close());

  it('serves an OpenAPI 3.1 document generated from the route schemas', async () => {
    const response = await fetch(`${base}/api/v2/openapi.json`);
    assert.equal(response.status, 200);
    const doc = (await response.json()) as {
      openapi: string;
      paths: Record<
        string,
        Record<string, { operationId?: string; parameters?: Array<{ name: string; required: boolean }> }>
      >;
    };
    assert.equal(doc.openapi, '3.1.0');
    const lookup = doc.paths['/api/v2/users-by-email']?.get;
    assert.equal(lookup?.operationId, 'listUsersByEmail');
    assert.deepEqual(lookup?.parameters?.find((p) => p.name === 'email')?.required, true);
    assert.ok(doc.paths['/api/v2/users/{id}']?.delete, 'DELETE /users/{id} is documented');
    // The operations the console relies on are the API's own, documented like any other.
    assert.equal(doc.paths['/api/v2/event-streams/{id}/stats']?.get?.operationId, 'getEventStreamStats');
    assert.equal(
      doc.paths['/api/v2/event-streams/{id}/deliveries/count']?.get?.operationId,
      'countEventStreamDeliveries',
    );
    const attempts = doc.paths['/api/v2/event-streams/{id}/attempts']?.get;
    assert.equal(attempts?.operationId, 'listEventStreamAttempts');
    assert.deepEqual(
      attempts?.parameters?.filter((p) => p.name !== 'id').map((p) => [p.name, p.required]),
      [
        ['after', false],
        ['take', false],
      ],
    );
    assert.equal(doc.paths['/api/v2/custom-domains/{id}/certificate']?.get?.operationId, 'getCustomDomainCertificate');
    // Custom-domain records are documented with their certificate member, closed as the original's is.
    const record = (
      doc.paths['/api/v2/custom-domains/{id}']?.get as unknown as {
        responses: Record<string, { content: Record<string, { schema: Schema }> }>;
      }
    ).responses['200']!.content['application/json']!.schema;
    assert.equal(record.additionalProperties, false);
    const keys = Object.keys(record.properties ?? {});
    assert.deepEqual(keys.slice(keys.indexOf('domain_metadata'), keys.indexOf('created_at') + 1), [
      'domain_metadata',
      'certificate',
      'created_at',
    ]);
    const certificate = record.properties!.certificate!;
    assert.equal(certificate.additionalProperties, false);
    assert.deepEqual(Object.keys(certificate.properties ?? {}), ['renews_before', 'status']);
    assert.deepEqual(
      certificate.properties!.status!.anyOf?.flatMap((s) => s.enum ?? [s.const]),
      ['provisioning', 'provisioned'],
    );
    assert.equal(doc.paths['/api/v2/emails/outbox']?.get?.operationId, 'listOutboxEmails');
    assert.equal(doc.paths['/api/v2/emails/outbox/{id}/message']?.get?.operationId, 'getOutboxEmailMessage');
    assert.equal(
      doc.paths['/api/v2/email-templates/{templateName}/preview']?.post?.operationId,
      'previewEmailTemplate',
    );
  });

  it('sends each document as the same bytes on every request, with an ETag a client revalidates with', async () => {
    const json = await fetch(`${base}/api/v2/openapi.json`);
    const body = await json.text();
    const etag = json.headers.get('etag');
    assert.match(etag ?? '', /^"[A-Za-z0-9_-]{27}"$/);
    assert.equal(json.headers.get('content-type'), 'application/json; charset=utf-8');
    assert.equal(Number(json.headers.get('content-length')), Buffer.byteLength(body));
    assert.equal(json.headers.get('cache-control'), 'no-cache');
    // /docs/json is the same document, byte for byte, under the same tag.
    const docsJson = await fetch(`${base}/docs/json`);
    assert.equal(await docsJson.text(), body);
    assert.equal(docsJson.headers.get('etag'), etag);
    assert.deepEqual(JSON.parse(body).paths['/api/v2/users-by-email'].get.operationId, 'listUsersByEmail');
    const yaml = await fetch(`${base}/docs/yaml`);
    assert.equal(yaml.status, 200);
    assert.match(yaml.headers.get('content-type') ?? '', /^application\/x-yaml/);
    const yamlText = await yaml.text();
    assert.equal(Number(yaml.headers.get('content-length')), Buffer.byteLength(yamlText));
    assert.equal(yaml.headers.get('transfer-encoding'), null);
    assert.match(yamlText, /^openapi: 3\.1\.0$/m);
    assert.match(yamlText, /operationId: listUsersByEmail/);
    assert.notEqual(yaml.headers.get('etag'), etag);
    // A client holding the tag gets 304 without the body; another tag, or none, gets the document.
    for (const header of [etag!, `W/${etag}`, `"other", ${etag}`, '*']) {
      const again = await fetch(`${base}/api/v2/openapi.json`, { headers: { 'if-none-match': header } });
      assert.equal(again.status, 304, header);
      assert.equal(await again.text(), '');
    }
    const stale = await fetch(`${base}/docs/json`, { headers: { 'if-none-match': '"other"' } });
    assert.equal(stale.status, 200);
    assert.equal(await stale.text(), body);
    const head = await fetch(`${base}/api/v2/openapi.json`, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(await head.text(), '');
  });

  it('renders the operations at /docs in headless Chromium', async (t) => {
    if (!CHROMIUM) {
      if (process.env.CI) assert.fail('Chromium is required in CI (.ci/run installs the Debian package)');
      return t.skip('chromium is not installed (apt-get install chromium)');
    }
    const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-chromium-'));
    try {
      const { stdout } = await run(
        CHROMIUM,
        [
          '--headless',
          '--no-sandbox',
          '--disable-gpu',
          '--disable-quic',
          '--no-first-run',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
          `--user-data-dir=${profile}`,
          '--virtual-time-budget=15000',
          '--dump-dom',
          `${base}/docs/`,
        ],
        { timeout: 60_000, maxBuffer: 32 * 1024 * 1024 },
      );
      // Swagger UI renders one block per operation, tagged with its path, once the document has loaded.
      for (const operation of ['/api/v2/users-by-email', '/api/v2/users/{id}']) {
        assert.ok(stdout.includes(`data-path="${operation}"`), `the page lists ${operation}`);
      }
      assert.match(stdout, /Search users by email/);
    } finally {
      fs.rmSync(profile, { recursive: true, force: true });
    }
  });
});

describe('a document sent before its route handler', () => {
  it('ends the request there, also when its client goes away while it is written', async () => {
    const warnings: string[] = [];
    // Over TLS, where a document over 256 KB is written in pieces, as a stream.
    const ca = createCertificateAuthority();
    const leaf = issueServerCertificate(ca, ['localhost', '127.0.0.1']);
    const app = Fastify({
      https: { cert: leaf.cert, key: leaf.key },
      logger: { level: 'warn', stream: { write: (line: string) => void warnings.push(line) } },
    });
    dropStalledResponses(app, 30_000, { info: () => undefined } as never);
    await registerApiReference(app);
    // A document of several MB: more than the loopback's buffers take at once, so it is still being
    // written (in pieces, as a stream) when the client goes away.
    for (let i = 0; i < 5000; i++)
      app.get(`/api/v2/thing${i}`, { schema: { description: `Thing ${i}. ${'x'.repeat(1000)}` } }, async () => ({}));
    let handled = 0;
    app.addHook('preHandler', async (request) => {
      if (request.url.startsWith('/docs/')) handled++;
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const { port } = app.server.address() as net.AddressInfo;
      const whole = await new Promise<number>((resolve, reject) =>
        https
          .get({ host: '127.0.0.1', port, path: '/docs/yaml', ca: ca.cert, servername: 'localhost' }, (res) => {
            let length = 0;
            res.on('data', (chunk: Buffer) => (length += chunk.length)).on('end', () => resolve(length));
          })
          .on('error', reject),
      );
      assert.ok(whole > 4 * 1024 * 1024, `${whole} bytes`);
      for (let i = 0; i < 3; i++) {
        const client = tls.connect({ port, host: '127.0.0.1', ca: ca.cert, servername: 'localhost' });
        client.write('GET /docs/yaml HTTP/1.1\r\nHost: localhost\r\n\r\n');
        await new Promise((resolve) => client.once('data', resolve));
        client.destroy();
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      assert.equal(handled, 0, "Swagger UI's own handler ran after the document was sent");
      assert.deepEqual(warnings, []);
    } finally {
      await app.close();
    }
  });
});
