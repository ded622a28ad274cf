import { rootCertificates } from 'node:tls';
import { Agent, setGlobalDispatcher } from 'undici';
import { createCertificateAuthority, generateRsaKeyPem, issueServerCertificate, type PemPair } from '../tls/dev-ca.ts';

/** The hosts an embedded server's certificate names: where it listens, by name and address. */
const LOCAL_HOSTS = ['localhost', '127.0.0.1', '::1'];

/**
 * One development CA per process, created on first use and kept in memory only. Every embedded server
 * of the process gets its own certificate from it, so trusting this one CA trusts them all, and the
 * CA's key never touches a disk.
 */
let processCa: Promise<PemPair> | undefined;
let trusted = false;
/** Certificates issued, by the hosts they name: instances on the same hosts share one (issuing costs a key pair). */
const issued = new Map<string, Promise<PemPair>>();

/**
 * A certificate for the local hosts (and `extraHosts`, e.g. seeded custom domains), with the CA that
 * issued it. The keys are generated on the thread pool, the CA's and the first leaf's at the same time,
 * while the caller goes on starting the server: on a first start they were most of its time.
 */
export async function developmentCertificate(
  extraHosts: readonly string[] = [],
): Promise<{ ca: string; cert: string; key: string }> {
  const hosts = [...new Set([...LOCAL_HOSTS, ...extraHosts.map((h) => h.toLowerCase())])];
  const name = hosts.join(',');
  const leafKey = issued.has(name) ? undefined : generateRsaKeyPem();
  processCa ??= generateRsaKeyPem().then((privateKeyPem) =>
    createCertificateAuthority({ commonName: 'Tenantry Embedded Development CA', days: 30, privateKeyPem }),
  );
  let leaf = issued.get(name);
  if (!leaf) {
    const ca = processCa;
    leaf = (async () => issueServerCertificate(await ca, hosts, { days: 30, privateKeyPem: await leafKey! }))();
    issued.set(name, leaf);
    // A failed generation is not kept: the next instance tries again.
    leaf.catch(() => issued.delete(name));
  }
  try {
    return { ca: (await processCa).cert, cert: (await leaf).cert, key: (await leaf).key };
  } catch (error) {
    processCa = undefined;
    throw error;
  }
}

/**
 * Makes this process's global fetch (which the official SDK calls) trust the development CA, beside
 * the system's roots: the SDK keeps reaching public HTTPS hosts. Done once; it replaces the global
 * dispatcher, which a process that set its own can opt out of (`trustCertificate: false`).
 */
export function trustInThisProcess(ca: string): void {
  if (trusted) return;
  trusted = true;
  setGlobalDispatcher(new Agent({ connect: { ca: [...rootCertificates, ca] } }));
}
