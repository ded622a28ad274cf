import { Writable } from 'node:stream';

export type LogLine = Record<string, unknown>;

/** A log destination keeping the JSON lines, for tests to read what the server and its workers said. */
export function logLines(): { lines: LogLine[]; stream: Writable } {
  const lines: LogLine[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n')) if (line !== '') lines.push(JSON.parse(line) as LogLine);
      done();
    },
  });
  return { lines, stream };
}
