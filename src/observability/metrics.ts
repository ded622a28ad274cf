import type { Counter, Histogram, Registry } from 'prom-client';
import { lazyModule } from '../lazy-module.ts';
import type { Logger } from '../logger.ts';

const promClient = lazyModule<typeof import('prom-client')>('prom-client');

/*
 * Every label value below comes from a closed set (a union type, a route template, an HTTP method or
 * status): never an id, an email, a tenant or a Host, so the number of series stays bounded whatever
 * the traffic.
 */

/** How a POST /oauth/token ended: the grant, or why it was refused. */
export type TokenOutcome =
  | 'granted'
  | 'invalid_request'
  | 'unsupported_grant_type'
  | 'invalid_client'
  | 'too_many_attempts'
  | 'too_many_requests'
  | 'no_audience'
  | 'audience_not_enabled'
  | 'client_without_scopes';

/** Which bucket refused a request: the tenant's, a client address's, or failed client authentications'. */
export type RateLimitBucket = 'tenant' | 'anonymous' | 'token_failures';
export type DeliveryOutcome = 'delivered' | 'retry' | 'failed' | 'unrecorded';
export type EmailOutcome = 'sent' | 'retry' | 'failed';
/** The domain's status after a background re-check, or `error` when the check itself failed. */
export type RecheckOutcome = 'ready' | 'pending_verification' | 'failed' | 'error';

/** Label of requests no route matched: the raw URL is never a label. */
export const UNMATCHED_ROUTE = 'unmatched';

/** What the server records. Modules depend on this interface, never on prom-client. */
export interface Metrics {
  /** False when METRICS_PORT is unset: nothing is kept, and the request hook is not even registered. */
  readonly enabled: boolean;
  /** `route` is the template the router matched (`/api/v2/users/:id`), undefined when none did. */
  httpRequest(route: string | undefined, method: string, status: number, seconds: number): void;
  tokenRequest(outcome: TokenOutcome): void;
  rateLimited(bucket: RateLimitBucket): void;
  delivery(outcome: DeliveryOutcome): void;
  /** A delivery worker's claim of due deliveries ran and took `claimed` of them (0: it found none). */
  deliveryClaim(claimed: number): void;
  email(outcome: EmailOutcome): void;
  domainRecheck(outcome: RecheckOutcome): void;
}

/** The recorder when metrics are off: every call is an empty function. */
export const noMetrics: Metrics = {
  enabled: false,
  httpRequest() {},
  tokenRequest() {},
  rateLimited() {},
  delivery() {},
  deliveryClaim() {},
  email() {},
  domainRecheck() {},
};

/** What the outboxes hold, read at scrape time by indexed queries (status, next_attempt_at). */
export interface Backlogs {
  deliveries(): Promise<{ due: number; oldestDueAt: string | undefined }>;
  emails(): Promise<{ pending: number; due: number }>;
}

/** pg.Pool's counters, read as they are at scrape time. */
export interface PoolCounts {
  totalCount: number;
  idleCount: number;
  waitingCount: number;
}

export interface MetricSources {
  backlogs: Backlogs;
  /** PostgreSQL's pool. SQLite has none: one synchronous connection in the process, nothing to wait for. */
  pool?: PoolCounts;
  logger: Logger;
}

/**
 * The Prometheus recorder: a Registry of its own (never prom-client's global one), so several servers
 * in one process (the tests) each count their own, with Node's default metrics (event-loop lag, heap,
 * GC, CPU) beside the server's.
 */
export class PrometheusMetrics implements Metrics {
  readonly enabled = true;
  readonly registry: Registry;
  private readonly requests: Counter<'route' | 'method' | 'status'>;
  private readonly durations: Histogram<'route' | 'method'>;
  private readonly tokens: Counter<'outcome'>;
  private readonly refusals: Counter<'bucket'>;
  private readonly deliveries: Counter<'outcome'>;
  private readonly claims: Counter<'found'>;
  private readonly emails: Counter<'outcome'>;
  private readonly rechecks: Counter<'outcome'>;

  constructor(sources: MetricSources) {
    // prom-client is loaded by the first recorder: without METRICS_PORT there is none.
    const { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } = promClient();
    this.registry = new Registry();
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.requests = new Counter({
      name: 'tenantry_http_requests_total',
      help: 'HTTP requests answered, by matched route template, method and status',
      labelNames: ['route', 'method', 'status'],
      registers,
    });
    this.durations = new Histogram({
      name: 'tenantry_http_request_duration_seconds',
      help: 'Time from receiving a request to its response, by matched route template and method',
      labelNames: ['route', 'method'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.tokens = new Counter({
      name: 'tenantry_token_requests_total',
      help: 'POST /oauth/token requests by outcome: granted, or the reason of the refusal',
      labelNames: ['outcome'],
      registers,
    });
    this.refusals = new Counter({
      name: 'tenantry_rate_limit_refusals_total',
      help: 'Requests refused with 429 by a rate limit, by bucket (tenant, anonymous, token_failures)',
      labelNames: ['bucket'],
      registers,
    });
    this.deliveries = new Counter({
      name: 'tenantry_webhook_deliveries_total',
      help: 'Webhook delivery attempts recorded, by outcome (delivered, retry, failed), and attempts given up unrecorded (unrecorded)',
      labelNames: ['outcome'],
      registers,
    });
    // Against tenantry_webhook_deliveries_total, the deliveries a claim takes on average; the claims that
    // found none are database reads that sent nothing (a poll with no work, or every stream at its cap).
    this.claims = new Counter({
      name: 'tenantry_webhook_delivery_claims_total',
      help: "Claims of due webhook deliveries run by this process's delivery worker, by whether they found any (some, none)",
      labelNames: ['found'],
      registers,
    });
    this.emails = new Counter({
      name: 'tenantry_emails_total',
      help: 'Email send attempts recorded, by outcome (sent, retry, failed)',
      labelNames: ['outcome'],
      registers,
    });
    this.rechecks = new Counter({
      name: 'tenantry_custom_domain_rechecks_total',
      help: "Background custom-domain re-checks, by the domain's status after the check (error: the check failed)",
      labelNames: ['outcome'],
      registers,
    });

    const { backlogs, logger } = sources;
    // A failed read is logged and leaves the gauge without a sample for this scrape (an absent series
    // alerts differently from a zero); the scrape itself still answers.
    const reading = async <T>(what: string, read: () => Promise<T>): Promise<T | undefined> => {
      try {
        return await read();
      } catch (error) {
        logger.error({ err: error }, `metrics: reading the ${what} failed`);
        return undefined;
      }
    };
    // The count and the age come from one query: the two gauges are collected side by side in a
    // scrape, and the second joins the read the first started.
    let deliveryRead: Promise<Awaited<ReturnType<Backlogs['deliveries']>> | undefined> | undefined;
    const readDeliveries = () => {
      deliveryRead ??= reading('webhook backlog', () => backlogs.deliveries()).finally(() => {
        deliveryRead = undefined;
      });
      return deliveryRead;
    };
    new Gauge({
      name: 'tenantry_webhook_backlog_due',
      help: 'Webhook deliveries due now (pending, next attempt in the past)',
      registers,
      async collect() {
        const backlog = await readDeliveries();
        if (backlog === undefined) this.reset();
        else this.set(backlog.due);
      },
    });
    new Gauge({
      name: 'tenantry_webhook_backlog_oldest_due_age_seconds',
      help: 'Seconds the oldest due webhook delivery has been due (0: none due)',
      registers,
      async collect() {
        const backlog = await readDeliveries();
        if (backlog === undefined) this.reset();
        else
          this.set(
            backlog.oldestDueAt === undefined ? 0 : Math.max(0, (Date.now() - Date.parse(backlog.oldestDueAt)) / 1000),
          );
      },
    });
    new Gauge({
      name: 'tenantry_email_backlog',
      help: 'Emails waiting in the outbox: all pending ones, and those due now',
      labelNames: ['state'],
      registers,
      async collect() {
        const backlog = await reading('mail backlog', () => backlogs.emails());
        this.reset();
        if (backlog === undefined) return;
        this.set({ state: 'pending' }, backlog.pending);
        this.set({ state: 'due' }, backlog.due);
      },
    });
    const pool = sources.pool;
    if (pool) {
      new Gauge({
        name: 'tenantry_db_pool_connections',
        help: 'PostgreSQL pool connections, all open ones and the idle among them',
        labelNames: ['state'],
        registers,
        collect() {
          this.set({ state: 'total' }, pool.totalCount);
          this.set({ state: 'idle' }, pool.idleCount);
        },
      });
      new Gauge({
        name: 'tenantry_db_pool_waiting',
        help: 'Queries waiting for a PostgreSQL pool connection',
        registers,
        collect() {
          this.set(pool.waitingCount);
        },
      });
    }
  }

  httpRequest(route: string | undefined, method: string, status: number, seconds: number): void {
    const template = route ?? UNMATCHED_ROUTE;
    this.requests.inc({ route: template, method, status: String(status) });
    this.durations.observe({ route: template, method }, seconds);
  }

  tokenRequest(outcome: TokenOutcome): void {
    this.tokens.inc({ outcome });
  }

  rateLimited(bucket: RateLimitBucket): void {
    this.refusals.inc({ bucket });
  }

  delivery(outcome: DeliveryOutcome): void {
    this.deliveries.inc({ outcome });
  }

  deliveryClaim(claimed: number): void {
    this.claims.inc({ found: claimed > 0 ? 'some' : 'none' });
  }

  email(outcome: EmailOutcome): void {
    this.emails.inc({ outcome });
  }

  domainRecheck(outcome: RecheckOutcome): void {
    this.rechecks.inc({ outcome });
  }

  /** The text exposition format, as Prometheus scrapes it. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
