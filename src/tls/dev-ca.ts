import { X509Certificate, createPrivateKey, generateKeyPair, generateKeyPairSync, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import fs from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';
import type Forge from 'node-forge';
import { lazyModule } from '../lazy-module.ts';
import { certificateAuthorityFiles } from './dev-ca-files.ts';
import { writeFileReplacing } from '../write-file.ts';

/** Loaded by the first certificate made: only development TLS needs it. */
const forge = lazyModule<typeof Forge>('node-forge');

export interface PemPair {
  cert: string;
  key: string;
}

export interface DevelopmentCertificateFiles {
  caCertFile: string;
  certFile: string;
  keyFile: string;
  caKeyFile: string;
}

const DEFAULT_CA_COMMON_NAME = 'Tenantry Development CA';
const DEFAULT_CA_DAYS = 3650;
// Apple platforms reject TLS server certificates valid for more than 398 days.
const DEFAULT_LEAF_DAYS = 397;
const DEFAULT_HOSTNAMES = ['localhost', '127.0.0.1', '::1'];
// Tolerates modest clock skew between the machine that issues and the one that verifies.
const BACKDATE_MS = 60 * 60 * 1000;
const DAY_MS = 24 * 60 * 60 * 1000;

const SERVER_CERT_FILE = 'server.pem';
const SERVER_KEY_FILE = 'server-key.pem';

interface ForgeKeyPair {
  keyPem: string;
  privateKey: Forge.pki.rsa.PrivateKey;
  publicKey: Forge.pki.rsa.PublicKey;
}

const RSA_KEY_OPTIONS = {
  modulusLength: 2048,
  publicKeyEncoding: { type: 'spki', format: 'pem' },
  privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
} as const;

// forge's pure-JS prime search takes seconds per key; OpenSSL takes milliseconds.
function generateRsaKeyPair(): ForgeKeyPair {
  return rsaKeyPairFromPem(generateKeyPairSync('rsa', RSA_KEY_OPTIONS).privateKey);
}

const generateKeyPairAsync = promisify(generateKeyPair);

/**
 * An RSA private key in PKCS#8 PEM, generated on the thread pool: a key takes 50–500 ms, long enough to
 * stall every request meanwhile, and several can be generated at once.
 */
export async function generateRsaKeyPem(): Promise<string> {
  return (await generateKeyPairAsync('rsa', RSA_KEY_OPTIONS)).privateKey;
}

// DER INTEGERs are signed and must be minimally encoded: forcing the top byte into
// 0x40..0x7f keeps the serial positive, 16 bytes long and free of a leading zero octet.
function randomSerialNumber(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0]! & 0x3f) | 0x40;
  return bytes.toString('hex');
}

function positiveDays(value: number | undefined, fallback: number, name: string): number {
  const days = value ?? fallback;
  if (!Number.isFinite(days) || days <= 0) {
    throw new RangeError(`${name} must be a positive number of days, got ${String(value)}`);
  }
  return days;
}

/** `privateKeyPem`: an RSA key generated beforehand (asynchronously), instead of a blocking generation here. */
export function createCertificateAuthority(
  opts: { commonName?: string; days?: number; privateKeyPem?: string } = {},
): PemPair {
  const commonName = opts.commonName ?? DEFAULT_CA_COMMON_NAME;
  const days = positiveDays(opts.days, DEFAULT_CA_DAYS, 'days');
  const keys = opts.privateKeyPem === undefined ? generateRsaKeyPair() : rsaKeyPairFromPem(opts.privateKeyPem);

  const cert = forge().pki.createCertificate();
  cert.publicKey = keys.publicKey;
  cert.serialNumber = randomSerialNumber();
  const now = Date.now();
  cert.validity.notBefore = new Date(now - BACKDATE_MS);
  cert.validity.notAfter = new Date(now + days * DAY_MS);
  const subject = [
    { name: 'commonName', value: commonName },
    { name: 'organizationName', value: 'Tenantry (development only)' },
  ];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    // pathLenConstraint 0: a leaked dev CA key still cannot mint further intermediate CAs.
    { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  cert.sign(keys.privateKey, forge().md.sha256.create());

  return { cert: forge().pki.certificateToPem(cert), key: keys.keyPem };
}

function normaliseHostname(raw: string): { kind: 'dns' | 'ip'; value: string } {
  let name = raw.trim();
  // Accept URL-style bracketed IPv6 ("[::1]") as users tend to copy it from addresses.
  if (name.startsWith('[') && name.endsWith(']')) name = name.slice(1, -1);
  if (name === '') throw new TypeError('hostnames must not contain empty entries');
  if (isIP(name) !== 0) return { kind: 'ip', value: name };
  // DNS names compare case-insensitively, and a trailing dot would never match an SNI name.
  return { kind: 'dns', value: name.toLowerCase().replace(/\.$/, '') };
}

function subjectKeyIdentifierBytes(cert: Forge.pki.Certificate): string {
  const ext = cert.getExtension('subjectKeyIdentifier') as { subjectKeyIdentifier?: string } | null;
  if (ext?.subjectKeyIdentifier) return forge().util.hexToBytes(ext.subjectKeyIdentifier);
  // A CA without the extension: derive the identifier the same way forge would have (RFC 5280 method 1).
  return cert.generateSubjectKeyIdentifier().getBytes();
}

/** A forge key pair from an RSA private key in PKCS#8 PEM (as OpenSSL generates it). */
function rsaKeyPairFromPem(keyPem: string): ForgeKeyPair {
  const privateKey = forge().pki.privateKeyFromPem(keyPem) as Forge.pki.rsa.PrivateKey;
  return { keyPem, privateKey, publicKey: forge().pki.setRsaPublicKey(privateKey.n, privateKey.e) };
}

/**
 * A leaf certificate for `hostnames`, signed by the CA. `privateKeyPem` lets a caller that generated
 * the RSA key asynchronously (a server issuing while it serves) avoid the blocking generation here.
 */
export function issueServerCertificate(
  ca: PemPair,
  hostnames: string[],
  opts: { days?: number; privateKeyPem?: string } = {},
): PemPair {
  if (hostnames.length === 0) throw new TypeError('at least one hostname is required');
  const names = hostnames.map(normaliseHostname);
  const days = positiveDays(opts.days, DEFAULT_LEAF_DAYS, 'days');

  const caCert = forge().pki.certificateFromPem(ca.cert);
  const caKey = forge().pki.privateKeyFromPem(ca.key) as Forge.pki.rsa.PrivateKey;
  const keys = opts.privateKeyPem === undefined ? generateRsaKeyPair() : rsaKeyPairFromPem(opts.privateKeyPem);

  const cert = forge().pki.createCertificate();
  cert.publicKey = keys.publicKey;
  cert.serialNumber = randomSerialNumber();
  const now = Date.now();
  cert.validity.notBefore = new Date(now - BACKDATE_MS);
  // A leaf that outlives its issuer would fail verification at the CA's expiry anyway;
  // clamping makes the real lifetime visible in the certificate itself.
  const requestedNotAfter = now + days * DAY_MS;
  cert.validity.notAfter = new Date(Math.min(requestedNotAfter, caCert.validity.notAfter.getTime()));
  cert.setSubject([{ name: 'commonName', value: names[0]!.value }]);
  cert.setIssuer(caCert.subject.attributes);
  cert.setExtensions([
    { name: 'basicConstraints', cA: false, critical: true },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', serverAuth: true },
    {
      name: 'subjectAltName',
      altNames: names.map((n) => (n.kind === 'ip' ? { type: 7, ip: n.value } : { type: 2, value: n.value })),
    },
    { name: 'subjectKeyIdentifier' },
    { name: 'authorityKeyIdentifier', keyIdentifier: subjectKeyIdentifierBytes(caCert) },
  ]);
  cert.sign(caKey, forge().md.sha256.create());

  return { cert: forge().pki.certificateToPem(cert), key: keys.keyPem };
}

function readIfExists(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** The CA in these two files; undefined when either is missing. */
export function loadCertificateAuthorityFiles(certFile: string, keyFile: string): PemPair | undefined {
  const cert = readIfExists(certFile);
  const key = readIfExists(keyFile);
  if (cert === undefined || key === undefined) return undefined;
  // Fail loudly rather than hand back a pair that would sign leaves nobody can verify.
  const x509 = new X509Certificate(cert);
  if (!x509.ca) throw new Error(`${certFile} is not a CA certificate`);
  if (!x509.checkPrivateKey(createPrivateKey(key))) {
    throw new Error(`${keyFile} does not match ${certFile}`);
  }
  return { cert, key };
}

export function loadCertificateAuthority(dir: string): PemPair | undefined {
  const { certFile, keyFile } = certificateAuthorityFiles(dir);
  return loadCertificateAuthorityFiles(certFile, keyFile);
}

function isExpired(certPem: string): boolean {
  return new Date(new X509Certificate(certPem).validTo).getTime() <= Date.now();
}

export function writeDevelopmentCertificates(
  dir: string,
  hostnames: string[] = DEFAULT_HOSTNAMES,
): DevelopmentCertificateFiles {
  fs.mkdirSync(dir, { recursive: true });
  const caFiles = certificateAuthorityFiles(dir);
  const files: DevelopmentCertificateFiles = {
    caCertFile: caFiles.certFile,
    caKeyFile: caFiles.keyFile,
    certFile: path.join(dir, SERVER_CERT_FILE),
    keyFile: path.join(dir, SERVER_KEY_FILE),
  };

  // Reusing the CA keeps a previously configured NODE_EXTRA_CA_CERTS / OS trust entry valid;
  // only an expired CA is replaced, since nothing could verify against it any more.
  let ca = loadCertificateAuthority(dir);
  if (ca === undefined || isExpired(ca.cert)) {
    ca = createCertificateAuthority();
    writeFileReplacing(files.caKeyFile, ca.key, 0o600);
    writeFileReplacing(files.caCertFile, ca.cert, 0o644);
  }

  const leaf = issueServerCertificate(ca, hostnames);
  writeFileReplacing(files.keyFile, leaf.key, 0o600);
  writeFileReplacing(files.certFile, leaf.cert, 0o644);
  return files;
}
