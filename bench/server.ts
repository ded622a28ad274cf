/**
 * A Tenantry server in its own process, for the load benchmarks: configuration from the environment
 * (see serverEnv in lib.ts), listening on 127.0.0.1 on a free port. Prints `READY {"port", "token"}`
 * with a real admin token fetched through POST /oauth/token; stops on SIGTERM.
 */
import { buildApp } from '../src/app.ts';
import { bootstrap } from '../src/bootstrap.ts';
import { loadConfig } from '../src/config.ts';
import { createServices } from '../src/services.ts';
import { ADMIN_ID, ADMIN_SECRET, AUDIENCE, HOST, TENANT_DOMAIN } from './lib.ts';

const config = loadConfig(process.env);
const services = await createServices(config);
const app = await buildApp(services);
await bootstrap(services);
await app.listen({ host: HOST, port: 0 });
const address = app.server.address();
const port = typeof address === 'object' && address ? address.port : NaN;

const response = await app.inject({
  method: 'POST',
  url: '/oauth/token',
  headers: { host: TENANT_DOMAIN, 'content-type': 'application/x-www-form-urlencoded' },
  payload: new URLSearchParams({
    grant_type: 'client_credentials',
    client_id: ADMIN_ID,
    client_secret: ADMIN_SECRET,
    audience: AUDIENCE,
  }).toString(),
});
if (response.statusCode !== 200) throw new Error(`token request failed: ${response.statusCode} ${response.body}`);
const token = (response.json() as { access_token: string }).access_token;

let stopping = false;
process.on('SIGTERM', () => {
  if (stopping) return;
  stopping = true;
  void app
    .close()
    .then(() => services.close())
    .then(() => process.exit(0));
});
process.stdout.write(`READY ${JSON.stringify({ port, token, rss: process.memoryUsage().rss })}\n`);
