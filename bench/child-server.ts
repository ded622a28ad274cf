/**
 * How the benchmarks' own node:http servers (bench/bare.ts, bench/receiver.ts) run as children of
 * spawnChild: on 127.0.0.1 on a free port, announced by the line `READY {"port"}`, and gone on SIGTERM
 * without waiting for kept-alive connections to idle out.
 */
import fs from 'node:fs';
import type http from 'node:http';

/**
 * Writes a line for the parent (`READY …`, `PROGRESS …`): on stdout, or on the descriptor spawnChild
 * named in BENCH_ANNOUNCE_FD when stdout holds the child's log lines.
 */
export function announce(line: string): void {
  const fd = process.env.BENCH_ANNOUNCE_FD;
  if (fd === undefined) process.stdout.write(`${line}\n`);
  else fs.writeSync(Number(fd), `${line}\n`);
}

export function serveAsChild(server: http.Server): void {
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : NaN;
    announce(`READY ${JSON.stringify({ port })}`);
  });
  process.on('SIGTERM', () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
