import net from 'node:net';

/** A TCP proxy a test can take down and bring back, to make a server (Redis…) unavailable behind it. */
export interface TcpProxy {
  port: number;
  /** Refuses new connections and cuts the open ones, as a server that went away. */
  stop(): Promise<void>;
  /** Accepts connections again, on the same port. */
  start(): Promise<void>;
  /**
   * Keeps connections open and passes what clients send on, but holds back what the server answers,
   * as a server that hangs: until release().
   */
  stall(): void;
  /** Delivers what was held back, and passes answers on again. */
  release(): void;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  let stalled = false;
  const held: Array<() => void> = [];
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    track(client);
    track(upstream);
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      if (stalled) held.push(() => client.write(chunk));
      else client.write(chunk);
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
  await listen(0);
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    async stop() {
      stalled = false;
      held.length = 0;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
    start: () => listen(port),
    stall() {
      stalled = true;
    },
    release() {
      stalled = false;
      for (const deliver of held.splice(0)) deliver();
    },
  };
}
