import { hashPassword } from './password.ts';

/** Hashes one tenant may have running at once (see PasswordHashing). */
const PER_TENANT = 2;

/**
 * Password hashing shared fairly between tenants. A hash is scrypt on libuv's thread pool (four threads,
 * first come, first served), some 20 ms of a core each: one tenant creating users as fast as its rate
 * limit lets it queued hundreds of hashes, and every other tenant's POST /users waited behind them
 * (1.5 s against 50 ms). Each tenant now has at most PER_TENANT hashes running; its others wait for
 * them, in order, so another tenant's hash finds a thread at once.
 */
export class PasswordHashing {
  private readonly running = new Map<string, number>();
  private readonly waiting = new Map<string, Array<() => void>>();

  constructor(
    private readonly hash: (password: string) => Promise<string> = hashPassword,
    private readonly perTenant = PER_TENANT,
  ) {}

  async hashFor(tenantId: string, password: string): Promise<string> {
    await this.turn(tenantId);
    try {
      return await this.hash(password);
    } finally {
      this.done(tenantId);
    }
  }

  private turn(tenantId: string): Promise<void> {
    const running = this.running.get(tenantId) ?? 0;
    if (running < this.perTenant) {
      this.running.set(tenantId, running + 1);
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const queue = this.waiting.get(tenantId);
      if (queue) queue.push(resolve);
      else this.waiting.set(tenantId, [resolve]);
    });
  }

  /** The tenant's next waiting hash takes the place of the one done (its running count stays). */
  private done(tenantId: string): void {
    const queue = this.waiting.get(tenantId);
    const next = queue?.shift();
    if (queue?.length === 0) this.waiting.delete(tenantId);
    if (next) return next();
    const running = (this.running.get(tenantId) ?? 1) - 1;
    if (running <= 0) this.running.delete(tenantId);
    else this.running.set(tenantId, running);
  }
}
