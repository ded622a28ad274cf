import { randomBytes } from 'node:crypto';
import type { Config } from './config.ts';
import { migrate, openDatabase, type Database } from './db/database.ts';
import { memoryRateLimiter, redisRateLimiters, type RateLimiter, type RateLimitSettings } from './http/rate-limit.ts';
import { CaptchaService } from './modules/captcha/service.ts';
import { ClientService } from './modules/clients/service.ts';
import { ClientStore } from './modules/clients/store.ts';
import { ConnectionService } from './modules/connections/service.ts';
import { ConnectionStore } from './modules/connections/store.ts';
import { CustomDomainService } from './modules/custom-domains/service.ts';
import { CustomDomainCertificateService } from './modules/custom-domains/certificates.ts';
import { CustomDomainHosts } from './modules/custom-domains/hosts.ts';
import { CustomDomainStore } from './modules/custom-domains/store.ts';
import { createCertificateSource } from './tls/certificate-source.ts';
import { DnsCheck } from './modules/custom-domains/dns-check.ts';
import { VerificationRechecks } from './modules/custom-domains/rechecks.ts';
import { AccessTokenService } from './modules/oauth/access-tokens.ts';
import { SigningKeyService } from './modules/signing-keys/service.ts';
import { SigningKeyStore } from './modules/signing-keys/store.ts';
import { TenantService } from './modules/tenants/service.ts';
import { TenantStore } from './modules/tenants/store.ts';
import { SegmentService } from './modules/segments/service.ts';
import { UserService } from './modules/users/service.ts';
import { SecretBox } from './secret-box.ts';
import { DeliveryWakeup } from './modules/event-streams/store/wakeup.ts';
import { DeliveryWorker } from './modules/event-streams/delivery/worker.ts';
import { endpointGuardFor } from './modules/event-streams/delivery/endpoint-guard.ts';
import { EventStreamService } from './modules/event-streams/service.ts';
import { EmailTemplateService } from './modules/email-templates/service.ts';
import { TemplateRenderer } from './modules/email-templates/renderer.ts';
import { VerificationEmailService } from './modules/email-verification/service.ts';
import { JobService } from './modules/email-verification/jobs/service.ts';
import { UsersImportService } from './modules/users-imports/service.ts';
import { UsersImportStore } from './modules/users-imports/store.ts';
import { UsersImportWorker } from './modules/users-imports/worker.ts';
import { StreamDeletionWorker } from './modules/event-streams/deletion/worker.ts';
import { RedeliveryWorker } from './modules/event-streams/redelivery/worker.ts';
import { TicketService } from './modules/email-verification/tickets/service.ts';
import { mailboxDir } from './mail/mailbox.ts';
import { mailboxTransport, smtpTransport } from './mail/transport.ts';
import { MailOutbox } from './mail/outbox.ts';
import { MailWorker } from './mail/worker.ts';
import { createLogger, flushLogger, type LogDestination, type Logger } from './logger.ts';
import { noMetrics, PrometheusMetrics, type Metrics } from './observability/metrics.ts';
import { Readiness } from './observability/readiness.ts';
import { SnapshotService } from './snapshots/service.ts';

/** Every long-lived part of a running server, built once from the configuration. */
export interface Services {
  config: Config;
  /** The one logger: requests, workers, the rate limiter, certificates and re-checks all write through it. */
  logger: Logger;
  /** What the server counts; a PrometheusMetrics when METRICS_PORT is set, else a recorder that keeps nothing. */
  metrics: Metrics;
  /** Whether this node should get traffic (`/health/ready`); drained first thing on shutdown. */
  readiness: Readiness;
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
  /** Certificates of custom domains, chosen by SNI on HTTPS. */
  customDomainCertificates: CustomDomainCertificateService;
  /** Background DNS re-checks of pending custom domains. */
  verificationRechecks: VerificationRechecks;
  eventStreams: EventStreamService;
  /** The outbox worker; absent when DELIVERY_WORKER=false, and for CLI commands. */
  deliveryWorker: DeliveryWorker | undefined;
  /** The threads email templates render on, off the event loop. */
  templateRenderer: TemplateRenderer;
  emailTemplates: EmailTemplateService;
  tickets: TicketService;
  verificationEmails: VerificationEmailService;
  jobs: JobService;
  /** Users-import jobs: uploads stored in the database, imported in batches. */
  usersImports: UsersImportService;
  /** Runs users-import jobs; absent for CLI commands. */
  usersImportWorker: UsersImportWorker | undefined;
  /** Removes deleted event streams' rows in the background; absent for CLI commands. */
  streamDeletionWorker: StreamDeletionWorker | undefined;
  redeliveryWorker: RedeliveryWorker | undefined;
  /** The mail outbox: emails queued, sent and failed, per tenant. */
  mailOutbox: MailOutbox;
  /** The mail outbox worker; absent when MAIL_WORKER=false, and for CLI commands. */
  mailWorker: MailWorker | undefined;
  /** Each tenant's bucket: every request with a valid token draws on it. */
  rateLimiter: RateLimiter;
  /** Buckets per client address for requests without a valid token, so they never drain a tenant's. */
  anonymousRateLimiter: RateLimiter;
  /** Failed client authentications at /oauth/token, per client id and address, and per address. */
  tokenFailureLimiters: { perClient: RateLimiter; perAddress: RateLimiter };
  /** Saved states of the whole database and the return to them (reset, snapshot, restore). */
  snapshots: SnapshotService;
  /** Stops background work and closes connections; idempotent. */
  close(): Promise<void>;
}

export interface ServiceOptions {
  /** Where JSON log lines go (stdout, written as they come, by default; the server passes `bufferedStdout()`). */
  logStream?: LogDestination;
  /**
   * False for CLI commands, which do their task and exit: no background re-checks of custom domains
   * and no delivery or mail worker, whatever the configuration says; those are left to the server.
   */
  background?: boolean;
}

export async function createServices(config: Config, options: ServiceOptions = {}): Promise<Services> {
  // Before anything opens: a missing development CA is a configuration error, not a half-started server.
  const certificateSource = createCertificateSource(config);
  const logger = createLogger(config, { stream: options.logStream });
  const database = openDatabase(config);
  await migrate(database);
  // The backlogs are read at scrape time, through the services built below.
  const metrics: Metrics =
    config.metricsPort === undefined
      ? noMetrics
      : new PrometheusMetrics({
          backlogs: { deliveries: () => eventStreams.dueBacklog(), emails: () => mailOutbox.backlog() },
          pool: database.pool,
          logger,
        });
  // A database in memory is gone at exit, and its key with it: no key file is written for it.
  const secretBox = config.encryptionKey
    ? SecretBox.fromKey(config.encryptionKey)
    : config.sqliteMemory
      ? SecretBox.fromKey(randomBytes(32).toString('hex'))
      : SecretBox.fromKeyFile(config.dataDir);
  const customDomainStore = new CustomDomainStore(database);
  // Tenants answer on their ready custom domains too: resolving a Host and checking a token's domains ask them.
  const tenants = new TenantService(new TenantStore(database), new CustomDomainHosts(customDomainStore));
  const signingKeys = new SigningKeyService(new SigningKeyStore(database), secretBox);
  const clients = new ClientService(new ClientStore(database));
  const connections = new ConnectionService(new ConnectionStore(database));
  const customDomainCertificates = new CustomDomainCertificateService(
    customDomainStore,
    secretBox,
    certificateSource,
    logger,
    { refreshMs: config.customDomainCertRefreshMs },
  );
  // After each change custom domains drop the tenants' cached hosts and domains (tenants.forget()).
  const customDomains = new CustomDomainService(
    customDomainStore,
    tenants,
    new DnsCheck(config.dnsServers),
    {
      edgeDomain: config.customDomainEdgeDomain,
      maxPerTenant: config.customDomainsMax,
      verifyWindowMs: config.customDomainVerifyWindowSeconds * 1000,
      recheckInitialMs: config.customDomainRecheckInitialMs,
      recheckMaxMs: config.customDomainRecheckMaxMs,
      // Records show the state of the certificates this source issues.
      certificateSource: certificateSource?.name,
    },
    {
      // A domain that becomes ready gets its certificate before its first visitor asks for it.
      becameReady: (hostname) => customDomainCertificates.provision(hostname),
    },
  );
  const background = options.background !== false;
  const verificationRechecks = new VerificationRechecks(
    customDomainStore,
    customDomains,
    config.customDomainRecheckInitialMs,
    logger,
    metrics,
  );
  if (background) verificationRechecks.start();
  // With Redis, every limit is shared by all the nodes (one connection, its outages logged once);
  // without it, each node counts for itself.
  const redisLimiter = config.redisUrl
    ? redisRateLimiters(config.redisUrl, { logger, whenUnavailable: config.rateLimitRedisFailure })
    : undefined;
  const limiter = (settings: RateLimitSettings) => redisLimiter?.(settings) ?? memoryRateLimiter(settings);
  const rateLimiter = limiter({ size: config.rateLimitSize, refillPerSecond: config.rateLimitPerSecond });
  const anonymousRateLimiter = limiter({
    size: config.anonymousRateLimitSize,
    refillPerSecond: config.anonymousRateLimitPerSecond,
  });
  const perMinute = (count: number) => ({ size: count, refillPerSecond: count / 60 });
  const tokenFailureLimiters = {
    perClient: limiter(perMinute(config.tokenFailuresPerClientPerMinute)),
    perAddress: limiter(perMinute(config.tokenFailuresPerAddressPerMinute)),
  };
  // One guard checks endpoints when streams are saved and again on every connection the worker opens.
  const endpointGuard = endpointGuardFor(config);
  // Workers, here or on other nodes, are woken as soon as a transaction that queued deliveries commits.
  const deliveryWakeup = new DeliveryWakeup(database);
  // A stream deleted here has its rows removed here at once; other nodes find it at their next poll.
  const streamDeletionWorker = background
    ? new StreamDeletionWorker(database, { chunkRows: config.eventStreamDeletionChunkRows }, logger)
    : undefined;
  streamDeletionWorker?.start();
  // A redelivery larger than one chunk recorded here is queued on from here at once; other nodes find it at their next poll.
  const redeliveryWorker = background
    ? new RedeliveryWorker(
        database,
        { chunkRows: config.eventStreamRedeliveryChunkRows, lanes: config.eventStreamRedeliveryLanes },
        (trx) => deliveryWakeup.queued(trx),
        logger,
      )
    : undefined;
  redeliveryWorker?.start();
  const eventStreams = new EventStreamService(database, secretBox, tenants, {
    guard: endpointGuard,
    maxPerTenant: config.eventStreamsMax,
    queued: (trx) => deliveryWakeup.queued(trx),
    deleted: () => streamDeletionWorker?.wake(),
    redeliveryChunkRows: config.eventStreamRedeliveryChunkRows,
    redeliveryLanes: config.eventStreamRedeliveryLanes,
    redeliveryRecorded: () => redeliveryWorker?.wake(),
    logger,
  });
  // Every user write records its webhook events in its own transaction (the events outbox).
  const users = new UserService(database, connections, secretBox, eventStreams);
  const deliveryWorker =
    background && config.deliveryWorker
      ? new DeliveryWorker(database, secretBox, config, endpointGuard, deliveryWakeup, logger, metrics)
      : undefined;
  deliveryWorker?.start();
  const templateRenderer = new TemplateRenderer({
    threads: config.templateRenderThreads,
    timeoutMs: config.templateRenderTimeoutMs,
    idleMs: config.templateRenderIdleMs,
  });
  const emailTemplates = new EmailTemplateService(database, templateRenderer);
  const tickets = new TicketService(database, users);
  const mailOutbox = new MailOutbox(database, secretBox);
  // Verification emails: a ticket, the template rendered on the render threads, a row in the mail outbox.
  const verificationEmails = new VerificationEmailService(
    customDomains,
    emailTemplates,
    tickets,
    templateRenderer,
    mailOutbox,
    { mailFrom: config.mailFrom },
    logger,
  );
  // Without SMTP_URL, emails land in the development mailbox, readable with `tenantry mailbox`.
  const mailWorker =
    background && config.mailWorker
      ? new MailWorker(
          mailOutbox,
          config.smtpUrl
            ? smtpTransport(config.smtpUrl, { timeoutMs: config.mailTimeoutMs, concurrency: config.mailConcurrency })
            : mailboxTransport(mailboxDir(config.dataDir)),
          config,
          logger,
          metrics,
        )
      : undefined;
  mailWorker?.start();
  let usersImportWorker: UsersImportWorker | undefined;
  // A job queued here is started here at once; other nodes find it at their next poll.
  const usersImports = new UsersImportService(
    database,
    new UsersImportStore(database),
    connections,
    users,
    eventStreams,
    { maxBytes: config.usersImportMaxBytes, leaseMs: config.usersImportLeaseMs },
    logger,
    () => usersImportWorker?.wake(),
  );
  if (background) {
    usersImportWorker = new UsersImportWorker(usersImports, logger);
    usersImportWorker.start();
  }
  const jobs = new JobService(database, users, verificationEmails, mailOutbox, usersImports);
  const accessTokens = new AccessTokenService(signingKeys, tenants, config.tokenLifetimeSeconds);
  const limiters = [rateLimiter, anonymousRateLimiter, tokenFailureLimiters.perClient, tokenFailureLimiters.perAddress];
  // After a restore nothing read from the old rows may be served: every cache goes, every bucket refills.
  const snapshots = new SnapshotService(
    database,
    () => [
      deliveryWorker,
      mailWorker,
      usersImportWorker,
      streamDeletionWorker,
      redeliveryWorker,
      background ? verificationRechecks : undefined,
    ],
    async () => {
      tenants.forget();
      signingKeys.forget();
      accessTokens.forget();
      customDomainCertificates.forgetAll();
      await Promise.all(limiters.map((l) => l.reset()));
    },
  );
  let closed: Promise<void> | undefined;
  return {
    config,
    logger,
    metrics,
    readiness: new Readiness(database, logger),
    database,
    secretBox,
    tenants,
    signingKeys,
    clients,
    accessTokens,
    connections,
    users,
    segments: new SegmentService(database),
    captcha: new CaptchaService(database, secretBox),
    customDomains,
    customDomainCertificates,
    verificationRechecks,
    eventStreams,
    deliveryWorker,
    templateRenderer,
    emailTemplates,
    tickets,
    verificationEmails,
    jobs,
    usersImports,
    usersImportWorker,
    streamDeletionWorker,
    redeliveryWorker,
    mailOutbox,
    mailWorker,
    rateLimiter,
    anonymousRateLimiter,
    tokenFailureLimiters,
    snapshots,
    close() {
      closed ??= (async () => {
        await snapshots.settled();
        await deliveryWorker?.stop();
        await mailWorker?.stop();
        await usersImportWorker?.stop();
        await streamDeletionWorker?.stop();
        await redeliveryWorker?.stop();
        await templateRenderer.close();
        await verificationRechecks.stop();
        await Promise.all(limiters.map((l) => l.close()));
        await customDomainCertificates.close();
        await database.close();
        // The last lines (the shutdown's own among them) reach the destination before the process goes.
        await flushLogger(logger);
      })();
      return closed;
    },
  };
}
