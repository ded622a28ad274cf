import type { Config } from '../config.ts';
import { ConfigError } from '../config.ts';
import { generateRsaKeyPem, issueServerCertificate, loadCertificateAuthorityFiles, type PemPair } from './dev-ca.ts';

/** A certificate as a source hands it over. */
export interface IssuedCertificate {
  /** PEM chain, leaf first (intermediates after it; the root is left to the client's trust store). */
  certificate: string;
  /** PKCS#8 PEM. */
  privateKey: string;
}

/**
 * Whoever issues the certificates of svc-managed custom domains. The server stores what `issue`
 * returns (the key sealed), shares it between nodes and asks again when it nears expiry; a source
 * only has to produce a certificate for one hostname.
 *
 * An ACME source (Let's Encrypt and the like) would implement `issue` by placing an order for the
 * hostname, answering its challenge — HTTP-01 with a route under `/.well-known/acme-challenge/`, or
 * TLS-ALPN-01 from the SNI callback — and returning the chain and key; it is then chosen in
 * `createCertificateSource`. Issuing may take seconds: the handshake that finds no certificate waits
 * for it, later ones are served from the store.
 */
export interface CertificateSource {
  /** Stored with each certificate; a certificate from another source is replaced on its next use. */
  readonly name: string;
  issue(hostname: string): Promise<IssuedCertificate>;
}

/** Short-lived like ACME certificates, so renewal runs routinely rather than once in years. */
const DEV_CA_CERTIFICATE_DAYS = 90;

/** Certificates signed by the local development CA; clients trust them through NODE_EXTRA_CA_CERTS. */
export class DevCaCertificateSource implements CertificateSource {
  readonly name = 'dev-ca';

  constructor(
    private readonly ca: PemPair,
    private readonly days = DEV_CA_CERTIFICATE_DAYS,
  ) {}

  async issue(hostname: string): Promise<IssuedCertificate> {
    const privateKeyPem = await generateRsaKeyPem();
    const leaf = issueServerCertificate(this.ca, [hostname], { days: this.days, privateKeyPem });
    return { certificate: leaf.cert, privateKey: leaf.key };
  }
}

/** The source CUSTOM_DOMAIN_CERT_SOURCE names; undefined for `none`. */
export function createCertificateSource(config: Config): CertificateSource | undefined {
  switch (config.customDomainCertSource) {
    case 'none':
      return undefined;
    case 'dev-ca': {
      const ca = loadCertificateAuthorityFiles(config.devCaCertFile, config.devCaKeyFile);
      if (ca === undefined) {
        throw new ConfigError(
          `CUSTOM_DOMAIN_CERT_SOURCE=dev-ca needs a development CA at ${config.devCaCertFile} and ${config.devCaKeyFile}: ` +
            'run `tenantry dev-cert`, or set DEV_CA_CERT_FILE and DEV_CA_KEY_FILE',
        );
      }
      return new DevCaCertificateSource(ca);
    }
  }
}
