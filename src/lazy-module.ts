import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/**
 * A package loaded on first use rather than at start-up. Several are needed only by some deployments or
 * only once the work they do arrives: `pg` (PostgreSQL), `ioredis` (REDIS_URL), `prom-client`
 * (METRICS_PORT), `nodemailer` (the first email), `undici` (the first webhook delivery), `node-forge` (the
 * development CA), `yaml` (a YAML seed). Loaded eagerly they held some 18 MB of every server's heap
 * (source text and bytecode) before any of them was used.
 * Each of these ships CommonJS, so the load is synchronous: callers stay synchronous too.
 */
export function lazyModule<T>(name: string): () => T {
  let loaded: T | undefined;
  return () => (loaded ??= require(name) as T);
}
