import dgram from 'node:dgram';

/**
 * A tiny authoritative DNS server for tests, on 127.0.0.1 and a random UDP port. It answers A, CNAME
 * and TXT questions from records the test sets; anything else gets NXDOMAIN.
 */
export interface TestDnsServer {
  /** `127.0.0.1:<port>`, for DNS_SERVERS. */
  address: string;
  setCname(name: string, target: string): void;
  setTxt(name: string, value: string): void;
  setA(name: string, ip: string): void;
  remove(name: string): void;
  /** Questions received for a name so far. */
  queries(name: string): number;
  /** Questions for the name get no answer until release (a resolver that hangs on one name). */
  hold(name: string): void;
  release(name: string): void;
  close(): Promise<void>;
}

const TYPE = { A: 1, CNAME: 5, TXT: 16 } as const;

interface Entry {
  cname?: string;
  txt?: string[];
  a?: string;
}

function encodeName(name: string): Buffer {
  const parts = name.replace(/\.$/, '').split('.').filter(Boolean);
  return Buffer.concat([
    ...parts.map((p) => Buffer.concat([Buffer.from([p.length]), Buffer.from(p, 'ascii')])),
    Buffer.from([0]),
  ]);
}

function readName(message: Buffer, offset: number): { name: string; end: number } {
  const labels: string[] = [];
  let at = offset;
  while (message[at]! !== 0) {
    const length = message[at]!;
    labels.push(message.subarray(at + 1, at + 1 + length).toString('ascii'));
    at += length + 1;
  }
  return { name: labels.join('.').toLowerCase(), end: at + 1 };
}

function record(name: Buffer, type: number, data: Buffer): Buffer {
  const head = Buffer.alloc(10);
  head.writeUInt16BE(type, 0);
  head.writeUInt16BE(1, 2);
  head.writeUInt32BE(0, 4); // TTL 0: tests change records between queries
  head.writeUInt16BE(data.length, 8);
  return Buffer.concat([name, head, data]);
}

export async function startDnsServer(): Promise<TestDnsServer> {
  const entries = new Map<string, Entry>();
  const counts = new Map<string, number>();
  const held = new Map<string, Array<() => void>>();
  const socket = dgram.createSocket('udp4');
  socket.on('message', (message, remote) => {
    try {
      const { name } = readName(message, 12);
      counts.set(name, (counts.get(name) ?? 0) + 1);
      const waiting = held.get(name);
      if (waiting) waiting.push(() => answer(message, remote));
      else answer(message, remote);
    } catch {
      // Malformed questions are ignored.
    }
  });
  const answer = (message: Buffer, remote: dgram.RemoteInfo) => {
    try {
      const id = message.readUInt16BE(0);
      const { name, end } = readName(message, 12);
      const qtype = message.readUInt16BE(end);
      const question = message.subarray(12, end + 4);
      const entry = entries.get(name);
      const answers: Buffer[] = [];
      const owner = encodeName(name);
      if (entry?.cname && (qtype === TYPE.CNAME || qtype === TYPE.A))
        answers.push(record(owner, TYPE.CNAME, encodeName(entry.cname)));
      if (entry?.txt && qtype === TYPE.TXT) {
        for (const value of entry.txt)
          answers.push(
            record(owner, TYPE.TXT, Buffer.concat([Buffer.from([Buffer.byteLength(value)]), Buffer.from(value)])),
          );
      }
      if (entry?.a && qtype === TYPE.A)
        answers.push(record(owner, TYPE.A, Buffer.from(entry.a.split('.').map(Number))));
      const header = Buffer.alloc(12);
      header.writeUInt16BE(id, 0);
      // QR, AA, RD copied; RCODE 3 (NXDOMAIN) when the name is unknown, 0 (NODATA) otherwise.
      header.writeUInt16BE(0x8400 | (message.readUInt16BE(2) & 0x0100) | (entry ? 0 : 3), 2);
      header.writeUInt16BE(1, 4);
      header.writeUInt16BE(answers.length, 6);
      socket.send(Buffer.concat([header, question, ...answers]), remote.port, remote.address);
    } catch {
      // Malformed questions are ignored.
    }
  };
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const entry = (name: string) => {
    const key = name.toLowerCase().replace(/\.$/, '');
    const found = entries.get(key) ?? {};
    entries.set(key, found);
    return found;
  };
  return {
    address: `127.0.0.1:${socket.address().port}`,
    setCname: (name, target) => {
      entry(name).cname = target;
    },
    setTxt: (name, value) => {
      (entry(name).txt ??= []).push(value);
    },
    setA: (name, ip) => {
      entry(name).a = ip;
    },
    remove: (name) => {
      entries.delete(name.toLowerCase());
    },
    queries: (name) => counts.get(name.toLowerCase()) ?? 0,
    hold: (name) => {
      if (!held.has(name.toLowerCase())) held.set(name.toLowerCase(), []);
    },
    release: (name) => {
      const waiting = held.get(name.toLowerCase()) ?? [];
      held.delete(name.toLowerCase());
      for (const send of waiting) send();
    },
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
