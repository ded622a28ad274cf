import fs from 'node:fs';
import type { Config } from './config.ts';
import { collectStartUpGarbage, IdleReclaim, mallocTrim, reclaimMemory } from './heap.ts';
import { bufferedStdout } from './logger.ts';
import { startServer, type StartOptions } from './start.ts';

/**
 * Runs the server until SIGTERM/SIGINT: then it stops accepting connections, lets in-flight requests
 * finish, and closes the database.
 */
export async function serve(config: Config, options: Pick<StartOptions, 'provision'> = {}): Promise<void> {
  const https =
    config.tlsCertFile && config.tlsKeyFile
      ? { cert: fs.readFileSync(config.tlsCertFile), key: fs.readFileSync(config.tlsKeyFile) }
      : undefined;
  // Log lines leave in batches: a request never waits on stdout (see bufferedStdout).
  const server = await startServer(config, {
    ...options,
    https,
    logStream: bufferedStdout(),
  });
  collectStartUpGarbage();
  const { tenant, admin, services, metricsServer } = server;
  const trim = mallocTrim();
  // Said once: without it an idle server keeps what the C allocator freed under load (some 10 MB).
  if (trim instanceof Error)
    services.logger.info(
      { reason: trim.message },
      'idle: malloc_trim unavailable; memory the C allocator frees stays with the process',
    );
  const idle = new IdleReclaim({
    reclaim: () => {
      const before = process.memoryUsage();
      // SQLite's page cache is refilled from the file on the next reads; the data stays.
      const { mallocTrimmed } = reclaimMemory(() => services.database.sqlite?.pragma('shrink_memory'));
      const after = process.memoryUsage();
      services.logger.debug(
        {
          heap_total_before: before.heapTotal,
          heap_total_after: after.heapTotal,
          rss_before: before.rss,
          rss_after: after.rss,
          malloc_trimmed: mallocTrimmed,
        },
        'idle: memory given back',
      );
    },
  }).start();
  const scheme = https ? 'https' : 'http';
  const lines = [
    `Tenantry serves the Management API at ${scheme}://${tenant.domain}/api/v2/ (listening on ${config.host}:${server.port}, ${services.database.dialect})`,
  ];
  if (admin) {
    const credentials = [
      'Admin client created with every scope — keep these credentials:',
      `  client_id:     ${admin.clientId}`,
      `  client_secret: ${admin.clientSecret}`,
    ].join('\n');
    // Only a person at a terminal sees the secret; where stdout is a log stream it stays in the 0600 file.
    if (!showOnTerminal(credentials))
      lines.push('Admin client created with every scope; its credentials are not printed here (no terminal).');
    if (admin.credentialsFile) lines.push(`  (${admin.credentialsFile} holds them, readable by its owner only)`);
  }
  lines.push(`API reference: ${scheme}://${tenant.domain}/docs`);
  if (metricsServer)
    lines.push(`Metrics: http://${config.host}:${metricsServer.port}/metrics (keep this port private)`);
  // The description never holds the SMTP password.
  if (services.mailWorker) lines.push(`Emails go to ${services.mailWorker.description}`);
  process.stdout.write(`${lines.join('\n')}\n`);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    services.logger.info({ signal }, 'shutting down');
    idle.stop();
    await server.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

/**
 * Writes `text` where only a person sees it: stdout when it is a terminal, else the process's
 * controlling terminal. False when there is none (a service manager, a container, CI): stdout then
 * feeds a log collector, where a secret must never go.
 */
function showOnTerminal(text: string): boolean {
  if (process.stdout.isTTY) {
    process.stdout.write(`${text}\n`);
    return true;
  }
  try {
    const tty = fs.openSync('/dev/tty', 'w');
    try {
      fs.writeSync(tty, `${text}\n`);
    } finally {
      fs.closeSync(tty);
    }
    return true;
  } catch {
    return false;
  }
}
