/**
 * A Tenantry server in its own process, for the load benchmarks: configuration from the environment
 * (see serverEnv in lib.ts), listening on 127.0.0.1 on a free port, over HTTPS when TLS_CERT_FILE and
 * TLS_KEY_FILE are set. Prints `READY {"port", "token", "readerToken"}`: real tokens fetched through
 * POST /oauth/token, of the admin client (every scope) and of a client holding only read:users;
 * stops on SIGTERM.
 */
import fs from 'node:fs';
import { buildApp } from '../src/app.ts';
import { bootstrap } from '../src/bootstrap.ts';
import { loadConfig } from '../src/config.ts';
import { bufferedStdout } from '../src/logger.ts';
import { collectStartUpGarbage } from '../src/heap.ts';
import { createServices } from '../src/services.ts';
import { announce } from './child-server.ts';
import { ADMIN_ID, ADMIN_SECRET, AUDIENCE, HOST, TENANT_DOMAIN } from './lib.ts';

const config = loadConfig(process.env);
// As serve.ts does: log lines to stdout in batches.
const services = await createServices(config, { logStream: bufferedStdout() });
const https =
  config.tlsCertFile && config.tlsKeyFile
    ? { cert: fs.readFileSync(config.tlsCertFile), key: fs.readFileSync(config.tlsKeyFile) }
    : undefined;
const app = await buildApp(services, { https });
const { tenant } = await bootstrap(services);
// As serve.ts does once started.
collectStartUpGarbage();
await app.listen({ host: HOST, port: 0 });
const address = app.server.address();
const port = typeof address === 'object' && address ? address.port : NaN;

async function grant(clientId: string, clientSecret: string): Promise<string> {
  const response = await app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { host: TENANT_DOMAIN, 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: clientSecret,
      audience: AUDIENCE,
    }).toString(),
  });
  if (response.statusCode !== 200) throw new Error(`token request failed: ${response.statusCode} ${response.body}`);
  return (response.json() as { access_token: string }).access_token;
}
const token = await grant(ADMIN_ID, ADMIN_SECRET);
// A token as most clients hold: one scope, a few hundred characters (the admin's carries every scope).
const readerSecret = 'bench-reader-secret-with-enough-entropy-0123456789';
const reader =
  (await services.clients.authenticate(tenant.id, 'bench-reader-client', readerSecret)) ??
  (await services.clients.create(tenant.id, {
    name: 'bench reader',
    scopes: ['read:users'],
    clientId: 'bench-reader-client',
    clientSecret: readerSecret,
  }));
const readerToken = await grant(reader.clientId, readerSecret);

let stopping = false;
process.on('SIGTERM', () => {
  if (stopping) return;
  stopping = true;
  void app
    .close()
    .then(() => services.close())
    .then(() => process.exit(0));
});
announce(`READY ${JSON.stringify({ port, token, readerToken, rss: process.memoryUsage().rss })}`);
