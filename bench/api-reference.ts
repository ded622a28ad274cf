/**
 * api-reference: the OpenAPI documents (GET /api/v2/openapi.json, 186 KB of JSON; GET /docs/yaml,
 * 456 KB of YAML) at 10 connections, against a bare node:http server answering the same bytes,
 * interleaved. These routes are public and tenantless, so no rate limit stands in front of them: their
 * cost per request is what a flood of them costs the server. Each run reports both servers' CPU per
 * request (/proc/<pid>/stat).
 */
import path from 'node:path';
import {
  comparisonRows,
  fmt,
  interleave,
  record,
  spawnBare,
  spawnServer,
  table,
  tempDir,
  type BenchContext,
} from './lib.ts';

const DOCUMENTS = ['/api/v2/openapi.json', '/docs/yaml'];

export async function run(_context: BenchContext): Promise<void> {
  const work = tempDir('api-reference');
  const server = await spawnServer(path.join(work.dir, 'data'));
  const summary: Array<Array<string | number>> = [];
  try {
    for (const url of DOCUMENTS) {
      const recorded = await record(server.port, url);
      const bytes = Buffer.from(recorded.bodyBase64, 'base64').length;
      if (recorded.status !== 200 || bytes < 100_000)
        throw new Error(`unexpected answer to ${url}: ${recorded.status}, ${bytes} bytes`);
      const bare = await spawnBare(recorded, work.dir);
      try {
        const results = await interleave(
          [
            { name: 'bare node:http', child: Object.assign(bare, { port: bare.ready.port as number }) },
            { name: 'tenantry', child: server },
          ],
          2,
          { path: url, connections: 10, durationSeconds: 5, warmupSeconds: 1, maxRequests: 200_000 },
        );
        const { header, rows, ratio, cpuRatio, baseline, measured } = comparisonRows(
          results,
          'bare node:http',
          'tenantry',
        );
        table(`GET ${url} (${fmt.int(bytes)} bytes), 10 connections, 5 s per run after 1 s warm-up`, header, rows);
        summary.push([
          url,
          fmt.int(bytes),
          fmt.int(baseline.cpuUsPerRequest),
          fmt.int(measured.cpuUsPerRequest),
          fmt.ratio(cpuRatio),
          fmt.int(baseline.reqPerSec),
          fmt.int(measured.reqPerSec),
          fmt.ratio(ratio),
        ]);
      } finally {
        await bare.stop();
      }
    }
    table(
      'api-reference — summary (means of 2 rounds)',
      [
        'document',
        'bytes',
        'bare CPU µs/req',
        'tenantry CPU µs/req',
        'CPU ratio',
        'bare req/s',
        'tenantry req/s',
        'req/s ratio',
      ],
      summary,
    );
  } finally {
    await server.stop();
    work.remove();
  }
}
