import path from 'node:path';
import { loadConfig } from '../config.ts';
import { writeDevelopmentCertificates } from '../tls/dev-ca.ts';
import { parseFlags, print } from './args.ts';

export async function devCertCommand(args: string[]): Promise<void> {
  const flags = parseFlags('dev-cert', args, ['dir', 'hosts']);
  const dir = path.resolve(flags.string('dir') ?? path.join(loadConfig().dataDir, 'tls'));
  const hosts = flags.list('hosts') ?? ['localhost', '127.0.0.1', '::1'];
  const files = writeDevelopmentCertificates(dir, hosts);
  print(
    `Wrote a development CA and a server certificate for ${hosts.join(', ')} to ${dir}.`,
    'Start the server with:',
    `  TLS_CERT_FILE=${files.certFile} TLS_KEY_FILE=${files.keyFile}`,
    'Let Node clients trust it with:',
    `  NODE_EXTRA_CA_CERTS=${files.caCertFile}`,
  );
}
