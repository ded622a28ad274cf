import { rootCertificates } from 'node:tls';
import { Agent, setGlobalDispatcher } from 'undici';
import { createCertificateAuthority, issueServerCertificate, type PemPair } from '../tls/dev-ca.ts';

/** The hosts an embedded server's certificate names: where it listens, by name and address. */
const LOCAL_HOSTS = ['localhost', '127.0.0.1', '::1'];

/**
 * One development CA per process, created on first use and kept in memory only. Every embedded server
 * of the process gets its own certificate from it, so trusting this one CA trusts them all, and the
 * CA's key never touches a disk.
 */
let processCa: PemPair | undefined;
let trusted = false;
/** Certificates issued, by the hosts they name: instances on the same hosts share one (issuing costs a key pair). */
const issued = new Map<string, PemPair>();

/** A certificate for the local hosts (and `extraHosts`, e.g. seeded custom domains), with the CA that issued it. */
export function developmentCertificate(extraHosts: readonly string[] = []): { ca: string; cert: string; key: string } {
  processCa ??= createCertificateAuthority({ commonName: 'Tenantry Embedded Development CA', days: 30 });
  const hosts = [...new Set([...LOCAL_HOSTS, ...extraHosts.map((h) => h.toLowerCase())])];
  const key = hosts.join(',');
  let leaf = issued.get(key);
  if (!leaf) issued.set(key, (leaf = issueServerCertificate(processCa, hosts, { days: 30 })));
  return { ca: processCa.cert, cert: leaf.cert, key: leaf.key };
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
