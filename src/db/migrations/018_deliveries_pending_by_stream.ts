import { sql, type Kysely } from 'kysely';

/**
 * Each stream's pending deliveries in due order. The worker's claim walks the streams that have pending
 * deliveries (one seek each) and takes each one's oldest due ones (claim.ts): its cost follows the number
 * of such streams, not the backlog. Reading the backlog in due order instead (deliveries_due) had to step
 * over every due delivery of the streams that were at their cap: with 150,000 due on 8 streams, each
 * claim read them all, and the node delivered 214 a second (`npm run bench -- delivery-throughput`).
 * Partial, like deliveries_failed: only pending rows are in it, and the queries name the status as a
 * literal so that either planner can use it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX deliveries_pending ON deliveries (stream_id, next_attempt_at) WHERE status = 'pending'`.execute(
    db,
  );
}
