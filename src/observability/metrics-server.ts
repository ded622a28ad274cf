import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Services } from '../services.ts';
import { PrometheusMetrics } from './metrics.ts';

export interface MetricsServer {
  /** The port it listens on (METRICS_PORT, or the one the system chose for 0). */
  port: number;
  close(): Promise<void>;
}

/**
 * The operator's endpoint, apart from the API: `GET /metrics` (Prometheus) and `GET /health/ready`,
 * on HOST at METRICS_PORT. It has no authentication and answers on every Host: it belongs on a
 * private network, never behind the API's public address. Nothing else is served here, and the API
 * serves no /metrics.
 */
export async function listenMetrics(
  services: Pick<Services, 'config' | 'metrics' | 'readiness' | 'logger'>,
): Promise<MetricsServer | undefined> {
  const { config, metrics, readiness, logger } = services;
  // Without METRICS_PORT nothing more listens (and the recorder keeps nothing).
  if (config.metricsPort === undefined || !(metrics instanceof PrometheusMetrics)) return undefined;
  const server = http.createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0];
    const answer = async (): Promise<void> => {
      if (request.method !== 'GET' && request.method !== 'HEAD') return send(405, 'text/plain', 'Method Not Allowed\n');
      if (path === '/metrics') {
        const { contentType, body } = await metrics.scrape();
        return send(200, contentType, body);
      }
      if (path === '/health/ready') {
        const state = await readiness.state();
        return send(state === 'ready' ? 200 : 503, 'application/json', JSON.stringify({ status: state }));
      }
      send(404, 'text/plain', 'Not Found\n');
    };
    const send = (status: number, contentType: string, body: string) => {
      response.writeHead(status, { 'content-type': contentType, 'cache-control': 'no-store' });
      response.end(request.method === 'HEAD' ? undefined : body);
    };
    answer().catch((error: unknown) => {
      logger.error({ err: error }, 'metrics endpoint: answering a scrape failed');
      if (!response.headersSent) send(500, 'text/plain', 'Internal Server Error\n');
      else response.destroy();
    });
  });
  // A scraper's idle keep-alive connection must not hold up shutdown.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.metricsPort, config.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (error) => logger.error({ err: error }, 'metrics endpoint failed'));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
