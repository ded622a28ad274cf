import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from '../logger.ts';

/**
 * Lets go of responses whose client stopped reading them. What the kernel cannot take of a response stays
 * in this process for as long as its connection lives, so clients that read nothing could hold the
 * server's memory response after response. Node's socket timeout (set to `stallMs`) fires once a socket
 * has been idle that long, and a write that no longer progresses counts as idle. A socket that still has
 * bytes to send when it fires belongs to a client that stopped reading: it is destroyed and its bytes are
 * let go. One without is waiting for its handler (a query held by a lock) or for its next request, which
 * keep-alive ends in time: it is left alone, and the timer runs again at its next activity.
 */
export function dropStalledResponses(server: Server, stallMs: number, logger: Pick<Logger, 'info'>): void {
  server.setTimeout(stallMs);
  server.on('timeout', (socket: Socket) => {
    const unsent = socket.writableLength;
    if (unsent === 0) return;
    logger.info(
      { remoteAddress: socket.remoteAddress, unsentBytes: unsent, stallMs },
      'connection closed: its client stopped reading the response',
    );
    socket.destroy();
  });
}
