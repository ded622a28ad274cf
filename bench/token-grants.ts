/**
 * token-grants: POST /oauth/token (client_credentials, form body) at 20 connections against a bare
 * node:http server answering the same bytes; interleaved bare, server, bare, server. Then the raw RS256
 * signature (raw-sign.ts) in the same run: the server's CPU per grant is compared with it.
 */
import path from 'node:path';
import {
  ADMIN_ID,
  ADMIN_SECRET,
  AUDIENCE,
  comparisonRows,
  fmt,
  interleave,
  record,
  runChild,
  spawnBare,
  spawnServer,
  table,
  tempDir,
  verdict,
} from './lib.ts';

const RAW_SIGNATURES = 20_000;

interface RawSignatures {
  signatures: number;
  cpuUsPerSignature: number;
  perSec: number;
}

export async function run(): Promise<void> {
  const work = tempDir('token-grants');
  const server = await spawnServer(path.join(work.dir, 'data'));
  let bare: Awaited<ReturnType<typeof spawnBare>> | undefined;
  try {
    const body = new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: ADMIN_ID,
      client_secret: ADMIN_SECRET,
      audience: AUDIENCE,
    }).toString();
    const headers = { 'content-type': 'application/x-www-form-urlencoded' };
    const recorded = await record(server.port, '/oauth/token', { method: 'POST', headers, body });
    if (recorded.status !== 200) throw new Error(`token request failed: ${recorded.status}`);
    // The baseline signs an input as long as this grant's: header and payload of the admin's token.
    const granted = JSON.parse(Buffer.from(recorded.bodyBase64, 'base64').toString()) as { access_token: string };
    const signingInputBytes = granted.access_token.lastIndexOf('.');
    bare = await spawnBare(recorded, work.dir);
    const results = await interleave(
      [
        { name: 'bare node:http', child: Object.assign(bare, { port: bare.ready.port as number }) },
        { name: 'tenantry', child: server },
      ],
      2,
      {
        path: '/oauth/token',
        method: 'POST',
        headers,
        body,
        connections: 20,
        durationSeconds: 10,
        warmupSeconds: 2,
        maxRequests: 1_000_000,
      },
    );
    const rss = server.rss();
    // The signature alone, measured in this run, after the load (the machine as it is now).
    const raw = (await runChild('raw-sign.ts', [
      String(RAW_SIGNATURES),
      String(signingInputBytes),
    ])) as unknown as RawSignatures;
    const { header, rows, ratio, measured } = comparisonRows(results, 'bare node:http', 'tenantry', 'grants/s');
    const overSignature = measured.cpuUsPerRequest / raw.cpuUsPerSignature;
    table(
      'token-grants — POST /oauth/token, client_credentials, form body, 20 connections, 10 s per run after 2 s warm-up',
      header,
      rows,
    );
    process.stdout.write(
      [
        '',
        `  ratio tenantry/bare (mean grants/s): ${fmt.ratio(ratio)}`,
        `  tenantry grants/s (mean): ${fmt.int(measured.reqPerSec)} — target ≥ 1,000/s: ${verdict(measured.reqPerSec >= 1000)}`,
        `  raw RS256 signature of ${fmt.int(signingInputBytes)} bytes, the grant's (thread pool, 20 at once, ${fmt.int(raw.signatures)}): ${fmt.int(raw.cpuUsPerSignature)} µs CPU, ${fmt.int(raw.perSec)}/s`,
        `  server CPU per grant ÷ raw signature: ${fmt.ratio(overSignature)} (${fmt.int(measured.cpuUsPerRequest)} ÷ ${fmt.int(raw.cpuUsPerSignature)} µs) — target ≤ 1.3×: ${verdict(overSignature <= 1.3)}`,
        `  server RSS after the run: ${fmt.mb(rss)}`,
        '',
      ].join('\n'),
    );
  } finally {
    await bare?.stop();
    await server.stop();
    work.remove();
  }
}
