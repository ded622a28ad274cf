/**
 * The token-grants baseline: raw RS256 signatures of a token-sized input (argv[3] bytes, the length of
 * the granted token's header and payload; 500 when not given) with a 2048-bit key, as the
 * server signs (`crypto.sign` with a callback, on the thread pool), `CONCURRENCY` at a time, in a Node
 * process of its own. Prints `READY {"signatures", "cpuUsPerSignature", "perSec"}`: CPU is the
 * process's user + system time (every thread), so it compares with the server's CPU per grant.
 */
import { generateKeyPairSync, sign } from 'node:crypto';

const SIGNATURES = Number(process.argv[2] ?? 20_000);
const CONCURRENCY = 20;

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const INPUT_BYTES = Number(process.argv[3] ?? 500);
// A header and payload of the grant's size, base64url.
const input = Buffer.from(`${'h'.repeat(100)}.${'p'.repeat(Math.max(0, INPUT_BYTES - 101))}`);
const signOnce = () =>
  new Promise<void>((resolve, reject) =>
    sign('sha256', input, privateKey, (error) => (error ? reject(error) : resolve())),
  );

// Warm-up: the thread pool's threads started, the key's context built.
for (let i = 0; i < 200; i++) await signOnce();
const cpuBefore = process.cpuUsage();
const started = performance.now();
let next = 0;
await Promise.all(
  Array.from({ length: CONCURRENCY }, async () => {
    while (next++ < SIGNATURES) await signOnce();
  }),
);
const ms = performance.now() - started;
const cpu = process.cpuUsage(cpuBefore);
process.stdout.write(
  `READY ${JSON.stringify({
    signatures: SIGNATURES,
    cpuUsPerSignature: (cpu.user + cpu.system) / SIGNATURES,
    perSec: (SIGNATURES / ms) * 1000,
  })}\n`,
);
