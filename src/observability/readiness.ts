import { migrationsComplete, ping, type Database } from '../db/database.ts';
import type { Logger } from '../logger.ts';

export type ReadinessState = 'ready' | 'draining' | 'database_unavailable' | 'migrations_pending';

/**
 * Whether this node should be sent traffic (`/health/ready`), unlike `/health`, which only says the
 * process answers. Not ready while the database cannot be reached, while it lacks a migration this
 * build needs, and from the moment the node starts shutting down, so a load balancer stops sending it
 * requests before it stops accepting them.
 */
export class Readiness {
  private draining = false;
  /** Migrations are never undone under a running node: once complete, they are not asked again. */
  private migrated = false;
  /** Whether the last probe failed on the database: its failure and recovery are logged once each. */
  private failing = false;

  constructor(
    private readonly database: Database,
    private readonly logger: Logger,
  ) {}

  /** Called first thing on SIGTERM/SIGINT, before the servers close. */
  drain(): void {
    this.draining = true;
  }

  async state(): Promise<ReadinessState> {
    if (this.draining) return 'draining';
    try {
      if (!this.migrated) this.migrated = await migrationsComplete(this.database);
      else await ping(this.database);
    } catch (error) {
      // Probes come every few seconds: the outage is logged when it starts, not at each probe.
      if (!this.failing) this.logger.warn({ err: error }, 'not ready: the database cannot be reached');
      this.failing = true;
      return 'database_unavailable';
    }
    if (this.failing) this.logger.info('ready again: the database answers');
    this.failing = false;
    return this.migrated ? 'ready' : 'migrations_pending';
  }
}
