import type { Config } from './config.ts';
import { migrate, openDatabase, type Database } from './db/database.ts';
import { memoryRateLimiter, redisRateLimiter, type RateLimiter } from './http/rate-limit.ts';
import { ClientService } from './modules/clients/service.ts';
import { ConnectionService } from './modules/connections/service.ts';
import { AccessTokenService } from './modules/oauth/access-tokens.ts';
import { SigningKeyService } from './modules/signing-keys/service.ts';
import { TenantService } from './modules/tenants/service.ts';
import { UserService } from './modules/users/service.ts';
import { SecretBox } from './secret-box.ts';

/** Every long-lived part of a running server, built once from the configuration. */
export interface Services {
  config: Config;
  database: Database;
  secretBox: SecretBox;
  tenants: TenantService;
  signingKeys: SigningKeyService;
  clients: ClientService;
  accessTokens: AccessTokenService;
  connections: ConnectionService;
  users: UserService;
  rateLimiter: RateLimiter;
  /** Stops background work and closes connections; idempotent. */
  close(): Promise<void>;
}

export async function createServices(config: Config, options: { onRateLimitError?: (error: unknown) => void } = {}): Promise<Services> {
  const database = openDatabase(config);
  await migrate(database);
  const secretBox = config.encryptionKey ? SecretBox.fromKey(config.encryptionKey) : SecretBox.fromKeyFile(config.dataDir);
  const tenants = new TenantService(database);
  const signingKeys = new SigningKeyService(database, secretBox);
  const clients = new ClientService(database);
  const connections = new ConnectionService(database);
  const rateLimitSettings = { size: config.rateLimitSize, refillPerSecond: config.rateLimitPerSecond };
  const rateLimiter = config.redisUrl
    ? redisRateLimiter(rateLimitSettings, config.redisUrl, options.onRateLimitError)
    : memoryRateLimiter(rateLimitSettings);
  let closed: Promise<void> | undefined;
  return {
    config,
    database,
    secretBox,
    tenants,
    signingKeys,
    clients,
    accessTokens: new AccessTokenService(signingKeys, tenants, config.tokenLifetimeSeconds),
    connections,
    users: new UserService(database, connections, secretBox),
    rateLimiter,
    close() {
      closed ??= (async () => {
        await rateLimiter.close();
        await database.close();
      })();
      return closed;
    },
  };
}
