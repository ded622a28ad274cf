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

/**
 * What a background job done in chunks did in all (src/background/chunked-jobs.ts): its lines — one a
 * turn handed on, then its last — added up, once its last (`finished`) is among them; undefined before.
 */
export function jobTotals(
  lines: readonly LogLine[],
  job: { name: string; finished: string; streamId: string },
): { chunks: number; rows: number; turns: number } | undefined {
  const own = lines.filter(
    (line) =>
      line.event_stream_id === job.streamId &&
      (line.msg === job.finished || line.msg === `${job.name} hands its turn on`),
  );
  if (!own.some((line) => line.msg === job.finished)) return undefined;
  return {
    chunks: own.reduce((sum, line) => sum + Number(line.chunks), 0),
    rows: own.reduce((sum, line) => sum + Number(line.rows), 0),
    turns: own.length,
  };
}
