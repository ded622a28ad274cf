/**
 * How the benchmarks' own node:http servers (bench/bare.ts, bench/receiver.ts) run as children of
 * spawnChild: on 127.0.0.1 on a free port, announced by the line `READY {"port"}`, and gone on SIGTERM
 * without waiting for kept-alive connections to idle out.
 */
import type http from 'node:http';

export function serveAsChild(server: http.Server): void {
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : NaN;
    process.stdout.write(`READY ${JSON.stringify({ port })}\n`);
  });
  process.on('SIGTERM', () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
