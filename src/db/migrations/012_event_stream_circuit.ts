import type { Kysely } from 'kysely';

/** Each stream's run of failed deliveries: it opens the stream's circuit, and a long one disables the stream. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('event_streams')
    .addColumn('consecutive_failures', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.alterTable('event_streams').addColumn('circuit_open_until', 'text').execute();
  await db.schema.alterTable('event_streams').addColumn('status_reason', 'text').execute();
}
