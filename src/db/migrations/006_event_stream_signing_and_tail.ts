import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Standard Webhooks signing secrets of a stream: one sealed JSON list, null when deliveries go unsigned.
  await db.schema.alterTable('event_streams').addColumn('signing_secrets', 'text').execute();
  // `tenantry events tail` asks for the attempts made since its last look.
  await db.schema.createIndex('delivery_attempts_timestamp').on('delivery_attempts').column('timestamp').execute();
}
