import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';
import { now } from '../../db/database.ts';
import type { Logger } from '../../logger.ts';
import type { SecretBox } from '../../secret-box.ts';
import type { CertificateSource } from '../../tls/certificate-source.ts';
import { SniContexts, type ServedCertificate, type SniCallback } from '../../tls/sni.ts';
import type { CustomDomainCertificate } from './schema.ts';
import type { CertificateValues, CustomDomainStore, ReadyDomain, StoredCertificate } from './store.ts';

/** An uploaded certificate refused, with the reason in words the operator can act on. */
export class CertificateRejected extends Error {}

/** `source` of certificates the operator uploaded for self-managed domains. */
export const UPLOADED = 'upload';

type Certificate = StoredCertificate;

/** A certificate chain and key, checked and normalised for storage. */
interface CheckedCertificate {
  certificate: string;
  privateKey: string;
  fingerprint: string;
  notBefore: string;
  notAfter: string;
}

const CERTIFICATE_PEM = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

function inspect(chainPem: string, privateKey: string): CheckedCertificate {
  const leaf = new X509Certificate(chainPem);
  return {
    certificate: chainPem,
    privateKey,
    fingerprint: leaf.fingerprint256,
    notBefore: new Date(leaf.validFrom).toISOString(),
    notAfter: new Date(leaf.validTo).toISOString(),
  };
}

/**
 * Checks an uploaded chain and key for a domain: the first certificate is the domain's own (not a CA),
 * covers the name, has not expired, matches the key, and each further certificate issued the one
 * before it.
 */
export function checkUploadedCertificate(domain: string, chainPem: string, keyPem: string): CheckedCertificate {
  const blocks = chainPem.match(CERTIFICATE_PEM) ?? [];
  if (blocks.length === 0)
    throw new CertificateRejected('the certificate file holds no PEM certificate (-----BEGIN CERTIFICATE-----)');
  const chain = blocks.map((block, index) => {
    try {
      return new X509Certificate(block);
    } catch {
      throw new CertificateRejected(
        `certificate ${index + 1} of the certificate file is not a valid X.509 certificate`,
      );
    }
  });
  // PKCS#8 and traditional OpenSSL encryption both say so in the PEM text; OpenSSL's error would not.
  if (/-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: 4,ENCRYPTED/.test(keyPem)) {
    throw new CertificateRejected(
      'the key file is passphrase-protected; give the key unencrypted (it is stored sealed)',
    );
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(keyPem);
  } catch {
    throw new CertificateRejected('the key file holds no PEM private key');
  }
  const leaf = chain[0]!;
  if (leaf.ca)
    throw new CertificateRejected(
      'the first certificate is a CA certificate; the chain must start with the certificate for the domain',
    );
  if (!leaf.checkPrivateKey(key)) throw new CertificateRejected('the private key does not match the certificate');
  if (leaf.checkHost(domain) === undefined) {
    throw new CertificateRejected(
      `the certificate does not cover ${domain} (it names ${leaf.subjectAltName ?? leaf.subject})`,
    );
  }
  if (Date.parse(leaf.validTo) <= Date.now()) {
    throw new CertificateRejected(`the certificate expired on ${new Date(leaf.validTo).toISOString()}`);
  }
  for (let i = 1; i < chain.length; i += 1) {
    if (!chain[i - 1]!.checkIssued(chain[i]!)) {
      throw new CertificateRejected(
        `certificate ${i + 1} of the chain did not issue certificate ${i}: order the chain leaf first, then each issuer`,
      );
    }
  }
  return inspect(`${blocks.join('\n')}\n`, key.export({ type: 'pkcs8', format: 'pem' }) as string);
}

const expired = (certificate: Pick<Certificate, 'not_after'>, at: number) => Date.parse(certificate.not_after) <= at;

/** Renewal starts once two thirds of the lifetime have passed: 30 days before expiry for 90-day certificates. */
function renewalDue(certificate: Certificate, at: number): boolean {
  const start = Date.parse(certificate.not_before);
  const end = Date.parse(certificate.not_after);
  return at >= end - (end - start) / 3;
}

/**
 * The certificates custom domains are served with over HTTPS, chosen by SNI. Ready svc-managed domains
 * get one from the configured certificate source, issued when the domain becomes ready (or on the
 * first handshake that finds none) and renewed before it expires; self-managed domains are served
 * with the certificate the operator uploaded. Certificates live in the database, keys sealed, so every
 * node serves the same one and a restart issues nothing new.
 */
export class CustomDomainCertificateService {
  private readonly contexts: SniContexts;
  /** Issuances under way on this node, by custom domain id: one order per domain at a time. */
  private readonly issuing = new Map<string, Promise<Certificate | undefined>>();
  private readonly background = new Set<Promise<unknown>>();
  private readonly onError: (error: unknown) => void;

  constructor(
    private readonly store: CustomDomainStore,
    private readonly secretBox: SecretBox,
    private readonly source: CertificateSource | undefined,
    logger: Logger,
    options: { refreshMs: number },
  ) {
    this.onError = (error) => logger.error({ err: error }, 'custom domain certificate failed');
    this.contexts = new SniContexts((hostname) => this.served(hostname), options.refreshMs, this.onError);
  }

  /** For the HTTPS server: the certificate of a ready custom domain, or the default one. */
  get sniCallback(): SniCallback {
    return this.contexts.callback;
  }

  /** A domain just became ready: have its certificate before the first visitor asks for it. */
  provision(hostname: string): void {
    this.track(this.served(hostname).then(() => this.contexts.forget(hostname)));
  }

  /**
   * Stores the operator's certificate for a self-managed domain (replacing any earlier one). It is
   * served once the domain is ready; other nodes pick it up within CUSTOM_DOMAIN_CERT_REFRESH_MS.
   */
  async upload(
    tenantId: string,
    hostname: string,
    chainPem: string,
    keyPem: string,
  ): Promise<{ fingerprint: string; notAfter: string; ready: boolean }> {
    const domain = hostname.toLowerCase().replace(/\.$/, '');
    const stored = await this.store.transaction(async (trx) => {
      const row = await this.store.findByHostname(trx, tenantId, domain, true);
      if (!row) throw new CertificateRejected(`tenant ${tenantId} has no custom domain ${domain}`);
      if (row.type !== 'self_managed_certs') {
        throw new CertificateRejected(
          `${domain} is an svc_managed_certs domain: its certificate comes from CUSTOM_DOMAIN_CERT_SOURCE, not from an upload`,
        );
      }
      const checked = checkUploadedCertificate(domain, chainPem, keyPem);
      await this.store.putCertificate(trx, row.id, this.row(UPLOADED, checked));
      return { fingerprint: checked.fingerprint, notAfter: checked.notAfter, ready: row.status === 'ready' };
    });
    this.contexts.forget(domain);
    return stored;
  }

  /**
   * What a handshake for the tenant's custom domain is served with, as the SNI lookup (served()) would
   * choose it, without issuing anything: the certificate's names, issuer, validity and fingerprint, or
   * none and why. The stored key is not even read.
   */
  async describe(tenantId: string, id: string): Promise<CustomDomainCertificate> {
    const domain = await this.store.get(tenantId, id);
    if (domain.status !== 'ready') return { status: 'none', reason: 'not_ready' };
    const svcManaged = domain.type === 'svc_managed_certs';
    if (svcManaged && this.source === undefined) return { status: 'none', reason: 'no_certificate_source' };
    const stored = await this.store.certificateOf(domain.id);
    if (stored === undefined) return { status: 'none', reason: svcManaged ? 'not_issued' : 'not_uploaded' };
    // An expired issued certificate is replaced on the next handshake, which waits for the new one.
    if (svcManaged && expired(stored, Date.now())) return { status: 'none', reason: 'not_issued' };
    const leaf = new X509Certificate(stored.certificate);
    return {
      status: stored.source === UPLOADED ? 'upload' : (stored.source as CustomDomainCertificate['status']),
      subject: leaf.subject.split('\n').join(', '),
      subject_alt_names: (leaf.subjectAltName ?? '').split(', ').filter(Boolean),
      issuer: leaf.issuer.split('\n').join(', '),
      not_before: stored.not_before,
      not_after: stored.not_after,
      fingerprint_sha256: stored.fingerprint,
    };
  }

  /** Certificates are read again from the database (after it was restored from a snapshot). */
  forgetAll(): void {
    this.contexts.forgetAll();
  }

  /** Waits for issuances under way, so none writes to a closed database. */
  async close(): Promise<void> {
    while (this.background.size > 0) await Promise.allSettled([...this.background]);
  }

  private row(source: string, checked: CheckedCertificate): CertificateValues {
    return {
      source,
      certificate: checked.certificate,
      private_key: this.secretBox.seal(checked.privateKey),
      fingerprint: checked.fingerprint,
      not_before: checked.notBefore,
      not_after: checked.notAfter,
      updated_at: now(),
    };
  }

  private track(work: Promise<unknown>): void {
    const tracked = work.catch(this.onError).finally(() => this.background.delete(tracked));
    this.background.add(tracked);
  }

  /** The SNI lookup: what a hostname is served with, issuing or renewing as needed. */
  private async served(hostname: string): Promise<ServedCertificate | undefined> {
    const found = await this.readyDomain(hostname);
    if (found === undefined) return undefined;
    let certificate = found.certificate;
    if (found.type === 'svc_managed_certs') {
      if (this.source === undefined) return undefined;
      const at = Date.now();
      if (certificate === undefined || expired(certificate, at)) {
        certificate = await this.issue(found, this.source);
      } else if (certificate.source !== this.source.name || renewalDue(certificate, at)) {
        // The current certificate still works: handshakes use it while the new one is issued.
        const source = this.source;
        this.track(this.issue(found, source).then(() => this.contexts.forget(found.domain)));
      }
    }
    if (certificate === undefined) return undefined;
    const sealed = certificate.private_key;
    return {
      fingerprint: certificate.fingerprint,
      certificate: certificate.certificate,
      privateKey: () => this.secretBox.open(sealed),
    };
  }

  private async readyDomain(hostname: string): Promise<ReadyDomain | undefined> {
    return this.store.readyWithCertificate(hostname.toLowerCase());
  }

  /** One issuance per domain on this node; across nodes the first stored certificate wins and the others adopt it. */
  private issue(domain: ReadyDomain, source: CertificateSource): Promise<Certificate | undefined> {
    let pending = this.issuing.get(domain.id);
    if (pending === undefined) {
      pending = this.issueNow(domain, source).finally(() => this.issuing.delete(domain.id));
      this.issuing.set(domain.id, pending);
    }
    return pending;
  }

  private async issueNow(domain: ReadyDomain, source: CertificateSource): Promise<Certificate | undefined> {
    const issued = await source.issue(domain.domain);
    const values = this.row(source.name, inspect(issued.certificate, issued.privateKey));
    // Compare-and-set on what was read: a node that lost the race stores nothing and serves the winner's.
    await this.store.storeIssuedCertificate(domain.id, domain.certificate?.fingerprint, values);
    return (await this.readyDomain(domain.domain))?.certificate;
  }
}
