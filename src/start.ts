import type { AddressInfo } from 'node:net';
import type { Server as TlsServer } from 'node:tls';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.ts';
import { bootstrap, type BootstrapResult } from './bootstrap.ts';
import type { Config } from './config.ts';
import type { LogDestination } from './logger.ts';
import { listenMetrics, type MetricsServer } from './observability/metrics-server.ts';
import { createServices, type Services } from './services.ts';

type Pems = { cert: string | Buffer; key: string | Buffer };

export interface StartOptions {
  /**
   * PEM certificate and key: HTTPS with them as the default certificate. A promise is awaited after the
   * services start, so that generating the keys and opening the database overlap.
   */
  https?: Pems | Promise<Pems>;
  /** Where JSON log lines go (stdout by default). */
  logStream?: LogDestination;
  /**
   * The default tenant's domain once the listening port is known: with it the server listens before
   * the tenant is created, so port 0 (a free port the system picks) can be part of the domain.
   */
  domainForPort?: (port: number) => string;
  /** What creates the first state (the default tenant and its admin client, or a seed); bootstrap() by default. */
  provision?: (services: Services, domain: string) => Promise<BootstrapResult>;
  /** reset() returns to the state right after start-up: taken then (on by default with TENANTRY_DEV_ENDPOINTS). */
  baseline?: boolean;
}

/** A started server: what `tenantry serve` and createTenantry() both run. */
export interface RunningServer extends BootstrapResult {
  app: FastifyInstance;
  services: Services;
  port: number;
  domain: string;
  metricsServer: MetricsServer | undefined;
  /** Stops accepting connections, lets in-flight requests finish, stops the workers, closes the database. */
  close(): Promise<void>;
}

/** The one start-up sequence: services → app → (listen) → first state → baseline → listen → metrics. */
export async function startServer(config: Config, options: StartOptions = {}): Promise<RunningServer> {
  const { https } = options;
  // A certificate still being made must not end the process unhandled if the services fail first.
  if (https instanceof Promise) https.catch(() => {});
  const services = await createServices(config, { logStream: options.logStream });
  // An in-memory database starts empty: its first tenant's signing key is generated while the app builds.
  if (config.sqliteMemory) services.signingKeys.prepare();
  let app: FastifyInstance | undefined;
  let metricsServer: MetricsServer | undefined;
  try {
    // A certificate still being made is set on the listener before it listens: the app is built meanwhile.
    app = await buildApp(services, { https: https instanceof Promise ? {} : https });
    if (https instanceof Promise) (app.server as unknown as TlsServer).setSecureContext(await https);
    const listenFirst = options.domainForPort !== undefined;
    let port = config.port;
    if (listenFirst) port = await listen(app, config);
    const domain = options.domainForPort?.(port) ?? config.tenantDomain;
    const first = await (options.provision ?? bootstrap)(services, domain);
    // Lookups made while the tenants were being created must not be served from the cache.
    services.tenants.forget();
    if (options.baseline ?? config.devEndpoints) await services.snapshots.markBaseline();
    if (!listenFirst) port = await listen(app, config);
    metricsServer = await listenMetrics(services);
    const started = app;
    let closing: Promise<void> | undefined;
    return {
      ...first,
      app,
      services,
      port,
      domain,
      metricsServer,
      close() {
        closing ??= (async () => {
          // Not ready from now on: load balancers stop sending requests while in-flight ones finish.
          services.readiness.drain();
          await started.close();
          await metricsServer?.close();
          await services.close();
        })();
        return closing;
      },
    };
  } catch (error) {
    await app?.close();
    await metricsServer?.close();
    await services.close();
    throw error;
  }
}

async function listen(app: FastifyInstance, config: Config): Promise<number> {
  await app.listen({ port: config.port, host: config.host });
  return (app.server.address() as AddressInfo).port;
}
