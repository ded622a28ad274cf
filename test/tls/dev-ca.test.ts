import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import forge from 'node-forge';
import {
  createCertificateAuthority,
  issueServerCertificate,
  loadCertificateAuthority,
  writeDevelopmentCertificates,
  type PemPair,
} from '../../src/tls/dev-ca.ts';

const execFileAsync = promisify(execFile);
const DAY_MS = 24 * 60 * 60 * 1000;

let ca: PemPair;
let caX509: X509Certificate;

before(() => {
  ca = createCertificateAuthority();
  caX509 = new X509Certificate(ca.cert);
});

function tmpDir(t: { after(fn: () => void): void }): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-dev-ca-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function startServer(
  t: { after(fn: () => Promise<void>): void },
  pair: PemPair,
): Promise<{ port: number; hits: () => number }> {
  let hits = 0;
  const server = https.createServer({ cert: pair.cert, key: pair.key }, (_req, res) => {
    hits += 1;
    res.end('tenantry-ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { port: (server.address() as AddressInfo).port, hits: () => hits };
}

type GetResult = { ok: true; status: number; body: string } | { ok: false; code: string | undefined };

// agent:false forces a fresh handshake per request so one test's trust decision cannot leak into another.
function get(url: string, options: https.RequestOptions = {}): Promise<GetResult> {
  return new Promise((resolve) => {
    const req = https.get(url, { agent: false, family: 4, ...options }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ ok: true, status: res.statusCode ?? 0, body }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ ok: false, code: err.code }));
  });
}

function forgeExtension(pem: string, name: string): Record<string, unknown> {
  const ext = forge.pki.certificateFromPem(pem).getExtension(name) as Record<string, unknown> | null;
  assert.ok(ext, `expected ${name} extension`);
  return ext;
}

// forge does not decode authorityKeyIdentifier; its keyIdentifier is the [0] IMPLICIT OCTET STRING.
function authorityKeyIdentifierHex(pem: string): string | undefined {
  const ext = forgeExtension(pem, 'authorityKeyIdentifier');
  const seq = forge.asn1.fromDer(String(ext.value));
  const parts = seq.value as forge.asn1.Asn1[];
  const keyId = parts.find((p) => p.tagClass === forge.asn1.Class.CONTEXT_SPECIFIC && p.type === 0);
  return keyId === undefined ? undefined : forge.util.bytesToHex(keyId.value as string);
}

test('a server certificate is trusted via the CA for both its DNS name and its IP', async (t) => {
  const leaf = issueServerCertificate(ca, ['localhost', '127.0.0.1']);
  const { port, hits } = await startServer(t, leaf);

  assert.deepEqual(await get(`https://localhost:${port}/`, { ca: ca.cert }), {
    ok: true,
    status: 200,
    body: 'tenantry-ok',
  });
  assert.deepEqual(await get(`https://127.0.0.1:${port}/`, { ca: ca.cert }), {
    ok: true,
    status: 200,
    body: 'tenantry-ok',
  });
  assert.equal(hits(), 2);
});

test('the same server is rejected by a client that does not trust the CA', async (t) => {
  const leaf = issueServerCertificate(ca, ['localhost', '127.0.0.1']);
  const { port, hits } = await startServer(t, leaf);

  for (const url of [`https://localhost:${port}/`, `https://127.0.0.1:${port}/`]) {
    const result = await get(url);
    assert.equal(result.ok, false, `${url} must not be trusted without the CA`);
    assert.ok(
      !result.ok &&
        ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY'].includes(
          result.code ?? '',
        ),
      `unexpected error ${JSON.stringify(result)}`,
    );
  }

  // A different CA must not vouch for it either.
  const otherCa = createCertificateAuthority({ commonName: 'Someone Else CA' });
  const result = await get(`https://localhost:${port}/`, { ca: otherCa.cert });
  assert.equal(result.ok, false);
  assert.equal(hits(), 0);
});

test('a certificate for one name is rejected for another name', async (t) => {
  const leaf = issueServerCertificate(ca, ['a.example.test']);
  const { port, hits } = await startServer(t, leaf);
  const base = { host: '127.0.0.1', port, path: '/', ca: ca.cert };

  // Positive control: proves the failure below is about the name, not about trust.
  assert.deepEqual(await get('https://127.0.0.1/', { ...base, servername: 'a.example.test' }), {
    ok: true,
    status: 200,
    body: 'tenantry-ok',
  });
  assert.deepEqual(await get('https://127.0.0.1/', { ...base, servername: 'b.example.test' }), {
    ok: false,
    code: 'ERR_TLS_CERT_ALTNAME_INVALID',
  });
  // No IP SAN was requested, so the bare IP must not match either.
  assert.deepEqual(await get(`https://127.0.0.1:${port}/`, { ca: ca.cert }), {
    ok: false,
    code: 'ERR_TLS_CERT_ALTNAME_INVALID',
  });
  assert.equal(hits(), 1);
});

test('CA certificate has the CA profile', () => {
  assert.equal(caX509.ca, true);
  assert.equal(caX509.subject, caX509.issuer);
  assert.equal(caX509.checkIssued(caX509), true);
  assert.equal(caX509.verify(caX509.publicKey), true);
  assert.equal(caX509.publicKey.asymmetricKeyDetails?.modulusLength, 2048);
  assert.match(caX509.subject, /CN=Tenantry Development CA/);

  const lifetimeDays = (Date.parse(caX509.validTo) - Date.now()) / DAY_MS;
  assert.ok(lifetimeDays > 3649 && lifetimeDays <= 3650, `CA lifetime ${lifetimeDays}`);
  assert.ok(Date.parse(caX509.validFrom) <= Date.now());

  const basic = forgeExtension(ca.cert, 'basicConstraints');
  assert.equal(basic.cA, true);
  assert.equal(basic.critical, true);
  const usage = forgeExtension(ca.cert, 'keyUsage');
  assert.equal(usage.keyCertSign, true);
  assert.equal(usage.cRLSign, true);
  assert.equal(usage.digitalSignature, false);
  assert.match(String(forgeExtension(ca.cert, 'subjectKeyIdentifier').subjectKeyIdentifier), /^[0-9a-f]{40}$/);

  const forgeCert = forge.pki.certificateFromPem(ca.cert);
  assert.equal(forgeCert.siginfo.algorithmOid, forge.pki.oids.sha256WithRSAEncryption);

  const custom = new X509Certificate(createCertificateAuthority({ commonName: 'Custom CA', days: 30 }).cert);
  assert.match(custom.subject, /CN=Custom CA/);
  const customDays = (Date.parse(custom.validTo) - Date.now()) / DAY_MS;
  assert.ok(customDays > 29 && customDays <= 30, `custom lifetime ${customDays}`);
});

test('server certificate has the leaf profile and is issued by the CA', () => {
  const leaf = issueServerCertificate(ca, ['localhost', '127.0.0.1', '::1', 'api.example.test']);
  const x509 = new X509Certificate(leaf.cert);

  assert.equal(x509.checkIssued(caX509), true);
  assert.equal(x509.verify(caX509.publicKey), true);
  assert.equal(x509.ca, false);
  assert.equal(x509.subject, 'CN=localhost');
  assert.equal(x509.issuer, caX509.subject);
  assert.equal(x509.publicKey.asymmetricKeyDetails?.modulusLength, 2048);

  const san = (x509.subjectAltName ?? '').split(', ');
  assert.ok(san.includes('DNS:localhost'), x509.subjectAltName);
  assert.ok(san.includes('DNS:api.example.test'), x509.subjectAltName);
  assert.ok(san.includes('IP Address:127.0.0.1'), x509.subjectAltName);
  // IPs must be iPAddress entries: a "DNS:127.0.0.1" would not satisfy clients.
  assert.ok(!san.some((entry) => entry.startsWith('DNS:127.') || entry.startsWith('DNS::')), x509.subjectAltName);
  assert.equal(x509.checkIP('127.0.0.1'), '127.0.0.1');
  assert.equal(x509.checkIP('::1'), '::1');
  assert.equal(x509.checkHost('api.example.test'), 'api.example.test');
  assert.equal(x509.checkHost('other.example.test'), undefined);

  assert.deepEqual(x509.keyUsage, ['1.3.6.1.5.5.7.3.1']);
  const basic = forgeExtension(leaf.cert, 'basicConstraints');
  assert.equal(basic.cA, false);
  assert.equal(
    authorityKeyIdentifierHex(leaf.cert),
    forgeExtension(ca.cert, 'subjectKeyIdentifier').subjectKeyIdentifier,
  );
  assert.notEqual(
    forgeExtension(leaf.cert, 'subjectKeyIdentifier').subjectKeyIdentifier,
    forgeExtension(ca.cert, 'subjectKeyIdentifier').subjectKeyIdentifier,
  );

  const lifetimeDays = (Date.parse(x509.validTo) - Date.now()) / DAY_MS;
  assert.ok(lifetimeDays > 396 && lifetimeDays <= 397, `leaf lifetime ${lifetimeDays}`);

  // Serial: positive (top bit clear), at least 64 bits of randomness, and unique per issuance.
  assert.match(x509.serialNumber, /^[0-7][0-9A-F]{15,}$/i);
  const again = new X509Certificate(issueServerCertificate(ca, ['localhost']).cert);
  assert.notEqual(again.serialNumber, x509.serialNumber);
  assert.notEqual(
    again.publicKey.export({ type: 'spki', format: 'pem' }),
    x509.publicKey.export({ type: 'spki', format: 'pem' }),
  );

  const shortLived = new X509Certificate(issueServerCertificate(ca, ['localhost'], { days: 7 }).cert);
  const shortDays = (Date.parse(shortLived.validTo) - Date.now()) / DAY_MS;
  assert.ok(shortDays > 6 && shortDays <= 7, `short lifetime ${shortDays}`);

  const otherCa = new X509Certificate(createCertificateAuthority().cert);
  assert.equal(x509.checkIssued(otherCa), false);
});

test('issueServerCertificate rejects an empty hostname list', () => {
  assert.throws(() => issueServerCertificate(ca, []), TypeError);
});

test('writeDevelopmentCertificates writes files with safe modes and reuses the CA', async (t) => {
  const dir = path.join(tmpDir(t), 'nested', 'certs');
  assert.equal(loadCertificateAuthority(dir), undefined);

  const first = writeDevelopmentCertificates(dir);
  assert.deepEqual(first, {
    caCertFile: path.join(dir, 'ca.pem'),
    caKeyFile: path.join(dir, 'ca-key.pem'),
    certFile: path.join(dir, 'server.pem'),
    keyFile: path.join(dir, 'server-key.pem'),
  });
  const mode = (file: string) => fs.statSync(file).mode & 0o777;
  if (process.platform !== 'win32') {
    assert.equal(mode(first.caKeyFile), 0o600);
    assert.equal(mode(first.keyFile), 0o600);
    assert.equal(mode(first.caCertFile), 0o644);
    assert.equal(mode(first.certFile), 0o644);
  }

  const firstCa = new X509Certificate(fs.readFileSync(first.caCertFile));
  const firstLeaf = new X509Certificate(fs.readFileSync(first.certFile));
  assert.equal(firstCa.ca, true);
  assert.equal(firstLeaf.checkIssued(firstCa), true);
  assert.equal(firstLeaf.checkHost('localhost'), 'localhost');
  assert.equal(firstLeaf.checkIP('127.0.0.1'), '127.0.0.1');
  assert.equal(firstLeaf.checkIP('::1'), '::1');
  assert.equal(firstLeaf.checkPrivateKey(createPrivateKey(fs.readFileSync(first.keyFile))), true);

  const loaded = loadCertificateAuthority(dir);
  assert.deepEqual(loaded, {
    cert: fs.readFileSync(first.caCertFile, 'utf8'),
    key: fs.readFileSync(first.caKeyFile, 'utf8'),
  });

  // A loosened key file must be tightened again on the next run.
  if (process.platform !== 'win32') fs.chmodSync(first.keyFile, 0o644);

  const second = writeDevelopmentCertificates(dir, ['dev.example.test']);
  assert.deepEqual(second, first);
  const secondCa = new X509Certificate(fs.readFileSync(second.caCertFile));
  const secondLeaf = new X509Certificate(fs.readFileSync(second.certFile));
  assert.equal(secondCa.fingerprint256, firstCa.fingerprint256);
  assert.equal(fs.readFileSync(second.caKeyFile, 'utf8'), loaded?.key);
  assert.notEqual(secondLeaf.fingerprint256, firstLeaf.fingerprint256);
  assert.notEqual(secondLeaf.serialNumber, firstLeaf.serialNumber);
  assert.equal(secondLeaf.checkIssued(firstCa), true);
  assert.equal(secondLeaf.checkHost('dev.example.test'), 'dev.example.test');
  assert.equal(secondLeaf.checkHost('localhost'), undefined);
  if (process.platform !== 'win32') assert.equal(mode(second.keyFile), 0o600);
  assert.deepEqual(
    fs.readdirSync(dir).sort(),
    ['ca-key.pem', 'ca.pem', 'server-key.pem', 'server.pem'],
    'no temp files may be left behind',
  );
});

test('file modes do not depend on the process umask', { skip: process.platform === 'win32' }, (t) => {
  const dir = tmpDir(t);
  // A restrictive umask would otherwise leave ca.pem unreadable to other users' tools (browsers, curl).
  const previous = process.umask(0o077);
  t.after(() => process.umask(previous));
  const files = writeDevelopmentCertificates(dir, ['localhost']);
  assert.equal(fs.statSync(files.caCertFile).mode & 0o777, 0o644);
  assert.equal(fs.statSync(files.certFile).mode & 0o777, 0o644);
  assert.equal(fs.statSync(files.caKeyFile).mode & 0o777, 0o600);
  assert.equal(fs.statSync(files.keyFile).mode & 0o777, 0o600);
});

test('an expired CA is replaced instead of reused', async (t) => {
  const dir = tmpDir(t);
  const expiring = createCertificateAuthority({ days: 0.5 / 86_400 });
  fs.writeFileSync(path.join(dir, 'ca.pem'), expiring.cert);
  fs.writeFileSync(path.join(dir, 'ca-key.pem'), expiring.key);
  // X.509 times have one-second resolution, so wait past the rounded notAfter.
  await new Promise((resolve) => setTimeout(resolve, 1_600));

  const files = writeDevelopmentCertificates(dir, ['localhost']);
  const replaced = new X509Certificate(fs.readFileSync(files.caCertFile));
  assert.notEqual(replaced.fingerprint256, new X509Certificate(expiring.cert).fingerprint256);
  assert.ok(Date.parse(replaced.validTo) > Date.now() + 3000 * DAY_MS);
  assert.equal(new X509Certificate(fs.readFileSync(files.certFile)).checkIssued(replaced), true);
});

test('loadCertificateAuthority refuses a key that does not belong to the certificate', (t) => {
  const dir = tmpDir(t);
  const other = createCertificateAuthority();
  fs.writeFileSync(path.join(dir, 'ca.pem'), ca.cert);
  fs.writeFileSync(path.join(dir, 'ca-key.pem'), other.key);
  assert.throws(() => loadCertificateAuthority(dir), /does not match/);
  assert.throws(() => writeDevelopmentCertificates(dir), /does not match/);
  // The mismatched CA must be left untouched for the user to sort out, not silently replaced.
  assert.equal(fs.readFileSync(path.join(dir, 'ca.pem'), 'utf8'), ca.cert);
});

test('NODE_EXTRA_CA_CERTS pointing at the written CA makes a plain node client trust the server', async (t) => {
  const dir = tmpDir(t);
  const files = writeDevelopmentCertificates(dir);
  const { port, hits } = await startServer(t, {
    cert: fs.readFileSync(files.certFile, 'utf8'),
    key: fs.readFileSync(files.keyFile, 'utf8'),
  });

  const script = `
    const https = require('node:https');
    https.get(process.argv[1], { family: 4 }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => { process.stdout.write(res.statusCode + ' ' + body); });
    }).on('error', (err) => { process.stdout.write('ERR ' + err.code); process.exitCode = 1; });
  `;
  const baseEnv: NodeJS.ProcessEnv = { ...process.env };
  for (const key of ['NODE_EXTRA_CA_CERTS', 'NODE_OPTIONS', 'NODE_TEST_CONTEXT', 'NODE_TLS_REJECT_UNAUTHORIZED']) {
    delete baseEnv[key];
  }
  const run = (env: NodeJS.ProcessEnv) =>
    execFileAsync(process.execPath, ['-e', script, `https://localhost:${port}/`], { env, timeout: 20_000 }).then(
      ({ stdout }) => ({ code: 0, stdout }),
      (err: { code?: number; stdout?: string }) => ({ code: err.code ?? -1, stdout: err.stdout ?? '' }),
    );

  assert.deepEqual(await run({ ...baseEnv, NODE_EXTRA_CA_CERTS: files.caCertFile }), {
    code: 0,
    stdout: '200 tenantry-ok',
  });
  // Negative control: the same child without the variable must fail, or the check above proves nothing.
  const untrusted = await run(baseEnv);
  assert.equal(untrusted.code, 1);
  assert.match(
    untrusted.stdout,
    /^ERR (UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)$/,
  );
  assert.equal(hits(), 1);
});
