import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bootstrap } from '../bootstrap.ts';
import { loadConfig } from '../config.ts';
import { ALL_SCOPES } from '../modules/oauth/scopes.ts';
import { applySeed } from '../seed/apply.ts';
import { readSeedFile, validSeed } from '../seed/load.ts';
import type { Seed } from '../seed/schema.ts';
import type { Snapshot } from '../snapshots/snapshot.ts';
import { startServer } from '../start.ts';
import { developmentCertificate, trustInThisProcess } from './trust.ts';

export type { Snapshot } from '../snapshots/snapshot.ts';
export type { Seed, SeedClient, SeedTenant, SeedUser } from '../seed/schema.ts';

export interface TenantryOptions {
  /** TCP port; 0 (the default) picks a free one. */
  port?: number;
  /** Address to listen on; 127.0.0.1 by default. */
  host?: string;
  /**
   * HTTPS (the default), with a certificate from an in-memory development CA, since the official SDK
   * speaks only `https://{domain}`. False: plain HTTP.
   */
  https?: boolean;
  /**
   * Whether this process's global `fetch` (the SDK's) is made to trust that CA, beside the system's
   * roots. True by default; false leaves the global dispatcher alone (use `ca` with your client).
   */
  trustCertificate?: boolean;
  /**
   * `memory` (the default): SQLite in memory, no files, gone at close(). A directory: SQLite there,
   * kept. `postgres://…`: that PostgreSQL database. A kept database keeps its tenant's domain
   * (`localhost:<port>`): start it again on the same `port`.
   */
  database?: string;
  /**
   * The first state: a seed object or the path of a seed file (YAML, or JSON for `.json`). Without it,
   * one tenant (`default`) on `localhost:<port>` with an admin client. reset() returns to it.
   */
  seed?: Seed | string;
  /** Any other setting of the server, by its environment variable name (README's configuration table). */
  settings?: Record<string, string | undefined>;
}

export interface Tenantry {
  /** `https://localhost:<port>` (or `http://…`). */
  url: string;
  /** `localhost:<port>`: what the SDK's `domain` option takes. */
  domain: string;
  /** `https://<domain>/`: the `iss` of the tokens. */
  issuer: string;
  /** `https://<domain>/api/v2/`: the Management API's audience. */
  audience: string;
  /** The admin client of the first tenant, granted every scope. */
  clientId: string;
  clientSecret: string;
  /** The development CA's certificate (PEM), for clients other than this process's fetch; undefined over HTTP. */
  ca: string | undefined;
  /** An access token of the admin client for the audience, with every scope or just `scopes`. */
  token(scopes?: readonly string[]): Promise<string>;
  /** Returns to the state right after start-up (seeded), in milliseconds: data, queued deliveries and emails. */
  reset(): Promise<void>;
  /** Saves the current state; restore() returns to it. */
  snapshot(): Promise<Snapshot>;
  restore(snapshot: Snapshot): Promise<void>;
  /** Stops the server and its workers; an in-memory database and its temporary directory are gone. */
  close(): Promise<void>;
}

/**
 * A Tenantry server inside this process, for tests: `const t = await createTenantry()`, then the
 * official SDK with `{ domain: t.domain, clientId: t.clientId, clientSecret: t.clientSecret }`.
 * Instances are independent: each has its own database, caches, rate limits, workers and threads.
 */
export async function createTenantry(options: TenantryOptions = {}): Promise<Tenantry> {
  // Checked before anything starts: a bad seed fails naming its member, with nothing to clean up.
  const seed =
    options.seed === undefined
      ? undefined
      : typeof options.seed === 'string'
        ? readSeedFile(options.seed)
        : validSeed(options.seed);
  const database = options.database ?? 'memory';
  const memory = database === 'memory';
  const postgres = /^postgres(ql)?:\/\//.test(database);
  // In memory, DATA_DIR still holds what a worker writes as files (the development mailbox): a
  // temporary directory, removed at close.
  const dataDir = memory || postgres ? fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-')) : path.resolve(database);
  const settings = options.settings ?? {};
  const removeDataDir = () => {
    if (dataDir !== path.resolve(database)) fs.rmSync(dataDir, { recursive: true, force: true });
  };
  let config;
  try {
    config = loadConfig({
      LOG_LEVEL: 'silent',
      ...settings,
      PORT: String(options.port ?? 0),
      HOST: options.host ?? settings.HOST ?? '127.0.0.1',
      DATA_DIR: dataDir,
      DATABASE_URL: postgres ? database : undefined,
      SQLITE_MEMORY: memory ? 'true' : 'false',
      // A secret known here is never written to DATA_DIR/admin-client.json.
      BOOTSTRAP_CLIENT_SECRET:
        settings.BOOTSTRAP_CLIENT_SECRET ?? (memory ? randomBytes(32).toString('base64url') : undefined),
    });
  } catch (error) {
    removeDataDir();
    throw error;
  }
  const https = options.https ?? true;
  // The seeded tenants' own domains are in the certificate too (their names must resolve to this host).
  const seededHosts = (seed?.tenants ?? []).flatMap((t) => [
    ...(t.domain ? [t.domain.replace(/:(\d+|\{port\})$/, '')] : []),
    ...(t.custom_domains ?? []).map((d) => d.domain),
  ]);
  // The certificate's keys are generated while the server starts (services, migrations); it is awaited
  // only where the listener needs it.
  const certificate = https ? developmentCertificate(seededHosts) : undefined;
  let tls: Awaited<typeof certificate>;
  let server;
  try {
    server = await startServer(config, {
      https: certificate?.then((pems) => {
        tls = pems;
        if (options.trustCertificate !== false) trustInThisProcess(pems.ca);
        return pems;
      }),
      domainForPort: settings.TENANT_DOMAIN ? undefined : (port) => `localhost:${port}`,
      provision: (services, domain) => (seed ? applySeed(services, seed, domain) : bootstrap(services, domain)),
      baseline: true,
    });
  } catch (error) {
    removeDataDir();
    throw error;
  }
  const { services, tenant } = server;
  const admin = server.admin ?? savedAdmin(dataDir, settings);
  if (!admin) throw new Error(`the admin client's secret of ${dataDir} is unknown: set BOOTSTRAP_CLIENT_SECRET`);
  const domain = tenant.domain;
  const scheme = https ? 'https' : 'http';
  const audience = `https://${domain}/api/v2/`;
  return {
    url: `${scheme}://${domain}`,
    domain,
    issuer: `https://${domain}/`,
    audience,
    clientId: admin.clientId,
    clientSecret: admin.clientSecret,
    ca: tls?.ca,
    async token(scopes = ALL_SCOPES) {
      const unknown = scopes.find((s) => !ALL_SCOPES.includes(s));
      if (unknown !== undefined) throw new TypeError(`unknown scope ${unknown}`);
      const issued = await services.accessTokens.issue({ tenant, domain, clientId: admin.clientId, audience, scopes });
      return issued.accessToken;
    },
    reset: () => services.snapshots.reset(),
    snapshot: () => services.snapshots.snapshot(),
    restore: (snapshot) => services.snapshots.restore(snapshot),
    async close() {
      await server.close();
      removeDataDir();
    },
  };
}

/** The admin credentials of a database started before: those given in the settings, or those its first start wrote. */
function savedAdmin(
  dataDir: string,
  settings: Record<string, string | undefined>,
): { clientId: string; clientSecret: string } | undefined {
  const { BOOTSTRAP_CLIENT_ID: clientId, BOOTSTRAP_CLIENT_SECRET: clientSecret } = settings;
  if (clientId !== undefined && clientSecret !== undefined) return { clientId, clientSecret };
  try {
    const saved = JSON.parse(fs.readFileSync(path.join(dataDir, 'admin-client.json'), 'utf8')) as {
      client_id: string;
      client_secret: string;
    };
    return { clientId: saved.client_id, clientSecret: saved.client_secret };
  } catch {
    return undefined;
  }
}
