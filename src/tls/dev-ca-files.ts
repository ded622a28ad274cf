import path from 'node:path';

/**
 * Where `dev-cert` writes the development CA in a directory (DATA_DIR/tls by default), and where the
 * server looks for it. Apart from dev-ca.ts so the configuration can name the files without loading
 * the certificate code.
 */
export function certificateAuthorityFiles(dir: string): { certFile: string; keyFile: string } {
  return { certFile: path.join(dir, 'ca.pem'), keyFile: path.join(dir, 'ca-key.pem') };
}
