import type { Config } from './config.ts';
import { migrate, openDatabase, type Database } from './db/database.ts';
import { memoryRateLimiter, redisRateLimiter, type RateLimiter } from './http/rate-limit.ts';
import { CaptchaService } from './modules/captcha/service.ts';
import { ClientService } from './modules/clients/service.ts';
import { ConnectionService } from './modules/connections/service.ts';
import { CustomDomainService } from './modules/custom-domains/service.ts';
import { DomainVerifier } from './modules/custom-domains/verification.ts';
import { AccessTokenService } from './modules/oauth/access-tokens.ts';
import { SigningKeyService } from './modules/signing-keys/service.ts';
import { TenantService } from './modules/tenants/service.ts';
import { SegmentService } from './modules/segments/service.ts';
import { UserService } from './modules/users/service.ts';
import { SecretBox } from './secret-box.ts';
import { DeliveryWorker } from './delivery/worker.ts';
import { EventStreamService } from './modules/event-streams/service.ts';

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
  segments: SegmentService;
  captcha: CaptchaService;
  customDomains: CustomDomainService;
  eventStreams: EventStreamService;
  /** The outbox worker; absent when DELIVERY_WORKER=false. */
  deliveryWorker: DeliveryWorker | undefined;
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
  const customDomains = new CustomDomainService(database, tenants, new DomainVerifier(config.dnsServers), {
    edgeDomain: config.customDomainEdgeDomain,
    maxPerTenant: config.customDomainsMax,
  });
  tenants.addHostLookup((host) => customDomains.lookupHost(host));
  tenants.addDomainsProvider((tenantId) => customDomains.readyDomains(tenantId));
  const rateLimitSettings = { size: config.rateLimitSize, refillPerSecond: config.rateLimitPerSecond };
  const rateLimiter = config.redisUrl
    ? redisRateLimiter(rateLimitSettings, config.redisUrl, options.onRateLimitError)
    : memoryRateLimiter(rateLimitSettings);
  const users = new UserService(database, connections, secretBox);
  const eventStreams = new EventStreamService(database, secretBox, { allowHttp: config.deliveryAllowHttp });
  // User changes write their events in their own transaction (the outbox).
  users.onChange((trx, change) => eventStreams.record(trx, { tenantId: change.tenantId, type: change.type, data: { object: change.user } }));
  const deliveryWorker = config.deliveryWorker ? new DeliveryWorker(database, eventStreams, config) : undefined;
  deliveryWorker?.start();
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
    users,
    segments: new SegmentService(database),
    captcha: new CaptchaService(database, secretBox),
    customDomains,
    eventStreams,
    deliveryWorker,
    rateLimiter,
    close() {
      closed ??= (async () => {
        await deliveryWorker?.stop();
        await rateLimiter.close();
        await database.close();
      })();
      return closed;
    },
  };
}
