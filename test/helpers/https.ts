import { Agent, setGlobalDispatcher } from 'undici';
import { createCertificateAuthority, issueServerCertificate, type PemPair } from '../../src/tls/dev-ca.ts';
import { freePort } from './server-process.ts';
import { startTestServer, type TestServer } from './server.ts';

export interface HttpsTestServer {
  server: TestServer;
  /** `localhost:<port>`: the tenant's domain, what the SDK's `domain` option takes. */
  domain: string;
  /** The CA that issued the server's certificate. */
  caPem: string;
  close(): Promise<void>;
}

let tls: { ca: PemPair; leaf: PemPair } | undefined;

/**
 * One CA and certificate per process, trusted by the process-wide fetch dispatcher (the SDK calls
 * the global fetch). Sharing them lets several servers run in one test file; each test file runs in
 * its own process, so changing the global dispatcher affects no other file.
 */
function processTls(): { ca: PemPair; leaf: PemPair } {
  if (tls === undefined) {
    const ca = createCertificateAuthority();
    tls = { ca, leaf: issueServerCertificate(ca, ['localhost', '127.0.0.1']) };
    setGlobalDispatcher(new Agent({ connect: { ca: ca.cert } }));
  }
  return tls;
}

/**
 * A test server listening for real on HTTPS at 127.0.0.1, for clients (the official SDK) that only
 * speak HTTPS to `https://${domain}`. Its admin token's audience is `https://${domain}/api/v2/`.
 */
export async function startHttpsTestServer(
  kind: 'sqlite' | 'postgres',
  overrides: Record<string, string> = {},
): Promise<HttpsTestServer> {
  const { ca, leaf } = processTls();
  for (let attempt = 1; ; attempt++) {
    // Known before the server starts, because the tenant's domain includes it; free when chosen, it may
    // be taken by another test file before the server listens (EADDRINUSE), and another is chosen.
    const port = await freePort();
    const domain = `localhost:${port}`;
    const server = await startTestServer(
      kind,
      { TENANT_DOMAIN: domain, ...overrides },
      { https: { cert: leaf.cert, key: leaf.key } },
    );
    try {
      await server.app.listen({ port, host: '127.0.0.1' });
    } catch (error) {
      await server.close();
      if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE' && attempt < 3) continue;
      throw error;
    }
    return { server, domain, caPem: ca.cert, close: () => server.close() };
  }
}
