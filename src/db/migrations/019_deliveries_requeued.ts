import { sql, type Kysely } from 'kysely';

/**
 * A redelivery's `retrying` attempt rows are no longer written when it is queued, only the deliveries'
 * new state (one UPDATE, whatever the number): a delivery queued again and not yet attempted is pending
 * with attempt_count 0 and attempt_seq above 0, and its `retrying` attempt (seq attempt_seq, at its
 * updated_at) is read from the delivery itself until its next attempt is recorded, which writes the row
 * with the attempt (store/outcomes.ts). This index holds those deliveries in the order a stream's
 * attempts are read (store/deliveries.ts, streamAttempts), so that read still seeks and stops after a page.
 *
 * Rows written by the earlier redelivery for deliveries that wait for their attempt are removed: they are
 * read from the delivery now, and would be shown twice (and written again with the attempt).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX deliveries_requeued ON deliveries (stream_id, updated_at, event_id, attempt_seq)
    WHERE status = 'pending' AND attempt_count = 0 AND attempt_seq > 0`.execute(db);
  await sql`DELETE FROM delivery_attempts WHERE status = 'retrying' AND EXISTS (
    SELECT 1 FROM deliveries d WHERE d.stream_id = delivery_attempts.stream_id AND d.event_id = delivery_attempts.event_id
      AND d.status = 'pending' AND d.attempt_count = 0 AND d.attempt_seq = delivery_attempts.seq)`.execute(db);
}
