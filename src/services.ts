import type { Config } from './config.ts';
import { migrate, openDatabase, type Database } from './db/database.ts';
import { memoryRateLimiter, redisRateLimiter, type RateLimiter, type RateLimitSettings } from './http/rate-limit.ts';
import { CaptchaService } from './modules/captcha/service.ts';
import { ClientService } from './modules/clients/service.ts';
import { ConnectionService } from './modules/connections/service.ts';
import { CustomDomainService } from './modules/custom-domains/service.ts';
import { CustomDomainCertificateService } from './modules/custom-domains/certificates.ts';
import { createCertificateSource } from './tls/certificate-source.ts';
import { DomainVerifier } from './modules/custom-domains/verification.ts';
import { VerificationRechecks } from './modules/custom-domains/rechecks.ts';
import { AccessTokenService } from './modules/oauth/access-tokens.ts';
import { SigningKeyService } from './modules/signing-keys/service.ts';
import { TenantService } from './modules/tenants/service.ts';
import { SegmentService } from './modules/segments/service.ts';
import { UserService } from './modules/users/service.ts';
import { SecretBox } from './secret-box.ts';
import { DeliveryWakeup } from './modules/event-streams/store/wakeup.ts';
import { DeliveryWorker } from './modules/event-streams/delivery/worker.ts';
import { endpointGuardFor } from './modules/event-streams/delivery/endpoint-guard.ts';
import { EventStreamService } from './modules/event-streams/service.ts';
import { EmailTemplateService } from './modules/email-templates/service.ts';
import { TemplateRenderer } from './modules/email-templates/renderer.ts';
import { VerificationEmailService } from './modules/emails/service.ts';
import { JobService } from './modules/jobs/service.ts';
import { TicketService } from './modules/tickets/service.ts';
import { mailboxDir } from './mail/mailbox.ts';
import { mailboxTransport, smtpTransport } from './mail/transport.ts';
import { MailWorker } from './mail/worker.ts';
import { createLogger, type Logger } from './logger.ts';

/** Every long-lived part of a running server, built once from the configuration. */
export interface Services {
  config: Config;
  /** The one logger: requests, workers, the rate limiter, certificates and re-checks all write through it. */
  logger: Logger;
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
  /** The mail outbox worker; absent when MAIL_WORKER=false, and for CLI commands. */
  mailWorker: MailWorker | undefined;
  /** Each tenant's bucket: every request with a valid token draws on it. */
  rateLimiter: RateLimiter;
  /** Buckets per client address for requests without a valid token, so they never drain a tenant's. */
  anonymousRateLimiter: RateLimiter;
  /** Failed client authentications at /oauth/token, per client id and address, and per address. */
  tokenFailureLimiters: { perClient: RateLimiter; perAddress: RateLimiter };
  /** Stops background work and closes connections; idempotent. */
  close(): Promise<void>;
}

export interface ServiceOptions {
  /** Where JSON log lines go (stdout by default). */
  logStream?: NodeJS.WritableStream;
  onRateLimitError?: (error: unknown) => void;
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
  const secretBox = config.encryptionKey ? SecretBox.fromKey(config.encryptionKey) : SecretBox.fromKeyFile(config.dataDir);
  const tenants = new TenantService(database);
  const signingKeys = new SigningKeyService(database, secretBox);
  const clients = new ClientService(database);
  const connections = new ConnectionService(database);
  const customDomains = new CustomDomainService(database, tenants, new DomainVerifier(config.dnsServers), {
    edgeDomain: config.customDomainEdgeDomain,
    maxPerTenant: config.customDomainsMax,
    verifyWindowMs: config.customDomainVerifyWindowSeconds * 1000,
    recheckInitialMs: config.customDomainRecheckInitialMs,
    recheckMaxMs: config.customDomainRecheckMaxMs,
  });
  const background = options.background !== false;
  const verificationRechecks = new VerificationRechecks(database, customDomains, config.customDomainRecheckInitialMs);
  if (background) verificationRechecks.start();
  const customDomainCertificates = new CustomDomainCertificateService(database, secretBox, certificateSource, {
    refreshMs: config.customDomainCertRefreshMs,
  });
  customDomains.onReady((domain) => customDomainCertificates.provision(domain));
  tenants.addHostLookup((host) => customDomains.lookupHost(host));
  tenants.addDomainsProvider((tenantId) => customDomains.readyDomains(tenantId));
  // With Redis, every limit is shared by all the nodes; without it, each node counts for itself.
  const limiter = (settings: RateLimitSettings) => config.redisUrl
    ? redisRateLimiter(settings, config.redisUrl, options.onRateLimitError)
    : memoryRateLimiter(settings);
  const rateLimiter = limiter({ size: config.rateLimitSize, refillPerSecond: config.rateLimitPerSecond });
  const anonymousRateLimiter = limiter({ size: config.anonymousRateLimitSize, refillPerSecond: config.anonymousRateLimitPerSecond });
  const perMinute = (count: number) => ({ size: count, refillPerSecond: count / 60 });
  const tokenFailureLimiters = {
    perClient: limiter(perMinute(config.tokenFailuresPerClientPerMinute)),
    perAddress: limiter(perMinute(config.tokenFailuresPerAddressPerMinute)),
  };
  const users = new UserService(database, connections, secretBox);
  // One guard checks endpoints when streams are saved and again on every connection the worker opens.
  const endpointGuard = endpointGuardFor(config);
  // Workers, here or on other nodes, are woken as soon as a transaction that queued deliveries commits.
  const deliveryWakeup = new DeliveryWakeup(database);
  const eventStreams = new EventStreamService(database, secretBox, tenants, {
    guard: endpointGuard,
    queued: (trx) => deliveryWakeup.queued(trx),
  });
  // User changes write their events in their own transaction (the outbox).
  users.onChange((trx, changes) => eventStreams.record(trx, changes.map((change) => ({ tenantId: change.tenantId, type: change.type, data: { object: change.user } }))));
  const deliveryWorker = background && config.deliveryWorker
    ? new DeliveryWorker(database, secretBox, config, endpointGuard, deliveryWakeup, logger)
    : undefined;
  deliveryWorker?.start();
  const templateRenderer = new TemplateRenderer({ threads: config.templateRenderThreads, timeoutMs: config.templateRenderTimeoutMs });
  const emailTemplates = new EmailTemplateService(database, templateRenderer);
  const tickets = new TicketService(database, users);
  const verificationEmails = new VerificationEmailService(secretBox, customDomains, emailTemplates, tickets, templateRenderer, { mailFrom: config.mailFrom });
  // Without SMTP_URL, emails land in the development mailbox, readable with `tenantry mailbox`.
  const mailWorker = background && config.mailWorker
    ? new MailWorker(
      database,
      secretBox,
      config.smtpUrl
        ? smtpTransport(config.smtpUrl, { timeoutMs: config.mailTimeoutMs, concurrency: config.mailConcurrency })
        : mailboxTransport(mailboxDir(config.dataDir)),
      config,
    )
    : undefined;
  mailWorker?.start();
  let closed: Promise<void> | undefined;
  return {
    config,
    logger,
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
    customDomainCertificates,
    verificationRechecks,
    eventStreams,
    deliveryWorker,
    templateRenderer,
    emailTemplates,
    tickets,
    verificationEmails,
    jobs: new JobService(database, users, verificationEmails),
    mailWorker,
    rateLimiter,
    anonymousRateLimiter,
    tokenFailureLimiters,
    close() {
      closed ??= (async () => {
        await deliveryWorker?.stop();
        await mailWorker?.stop();
        await templateRenderer.close();
        await verificationRechecks.stop();
        await Promise.all([rateLimiter, anonymousRateLimiter, tokenFailureLimiters.perClient, tokenFailureLimiters.perAddress].map((l) => l.close()));
        await customDomainCertificates.close();
        await database.close();
      })();
      return closed;
    },
  };
}
