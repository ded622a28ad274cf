import fs from 'node:fs';
import { CertificateRejected } from '../modules/custom-domains/certificates.ts';
import { parseFlags, print, UsageError, withServices } from './args.ts';
import { requireTenant } from './clients.ts';

function readFile(flag: string, file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (error) {
    throw new UsageError(
      `custom-domains certificate: cannot read --${flag} ${file} (${(error as NodeJS.ErrnoException).code ?? String(error)})`,
    );
  }
}

export async function customDomainsCommand([sub, ...args]: string[]): Promise<void> {
  switch (sub) {
    case 'certificate': {
      const flags = parseFlags('custom-domains certificate', args, ['tenant', 'domain', 'cert', 'key']);
      const tenantId = flags.required('tenant');
      const domain = flags.required('domain');
      const chain = readFile('cert', flags.required('cert'));
      const key = readFile('key', flags.required('key'));
      return withServices(async (services) => {
        const tenant = await requireTenant(services, tenantId);
        let stored: Awaited<ReturnType<typeof services.customDomainCertificates.upload>>;
        try {
          stored = await services.customDomainCertificates.upload(tenant.id, domain, chain, key);
        } catch (error) {
          if (error instanceof CertificateRejected)
            throw new UsageError(`custom-domains certificate: ${error.message}; nothing was stored`);
          throw error;
        }
        print(
          `Stored the certificate of ${domain.toLowerCase()} (tenant ${tenant.id}), valid until ${stored.notAfter}, SHA-256 ${stored.fingerprint}.`,
          stored.ready
            ? 'Every node serves it over HTTPS within CUSTOM_DOMAIN_CERT_REFRESH_MS.'
            : 'It is served over HTTPS once the domain is verified.',
        );
      });
    }
    default:
      throw new UsageError(`custom-domains: expected "certificate", got ${sub === undefined ? 'nothing' : `"${sub}"`}`);
  }
}
