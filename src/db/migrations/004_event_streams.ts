import type { Kysely } from 'kysely';

/** Event streams, and the transactional outbox their events are delivered from. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('event_streams')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id').onDelete('cascade'))
    .addColumn('name', 'text')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('subscriptions', 'text', (c) => c.notNull())
    .addColumn('destination', 'text', (c) => c.notNull())
    .addColumn('secret', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    // Names are unique per tenant (the original's 409); several unnamed streams may coexist (NULLs are distinct).
    .addUniqueConstraint('event_streams_tenant_name', ['tenant_id', 'name'])
    .execute();
  // Keyset paging of the list: tenant, then id.
  await db.schema.createIndex('event_streams_tenant_id').on('event_streams').columns(['tenant_id', 'id']).execute();

  await db.schema
    .createTable('events')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id').onDelete('cascade'))
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('time', 'text', (c) => c.notNull())
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('data', 'text', (c) => c.notNull())
    .addColumn('purpose', 'text')
    .execute();

  await db.schema
    .createTable('deliveries')
    .addColumn('stream_id', 'text', (c) => c.notNull().references('event_streams.id').onDelete('cascade'))
    .addColumn('event_id', 'text', (c) => c.notNull().references('events.id').onDelete('cascade'))
    .addColumn('event_type', 'text', (c) => c.notNull())
    .addColumn('event_time', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempt_count', 'integer', (c) => c.notNull())
    .addColumn('attempt_seq', 'integer', (c) => c.notNull())
    .addColumn('next_attempt_at', 'text', (c) => c.notNull())
    .addColumn('claimed_until', 'text')
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('deliveries_pk', ['stream_id', 'event_id'])
    .execute();
  // The worker's poll: due pending deliveries.
  await db.schema.createIndex('deliveries_due').on('deliveries').columns(['status', 'next_attempt_at']).execute();

  await db.schema
    .createTable('delivery_attempts')
    .addColumn('stream_id', 'text', (c) => c.notNull())
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('timestamp', 'text', (c) => c.notNull())
    .addColumn('error_message', 'text')
    .addColumn('duration', 'double precision')
    .addPrimaryKeyConstraint('delivery_attempts_pk', ['stream_id', 'event_id', 'seq'])
    .addForeignKeyConstraint(
      'delivery_attempts_delivery',
      ['stream_id', 'event_id'],
      'deliveries',
      ['stream_id', 'event_id'],
      (c) => c.onDelete('cascade'),
    )
    .execute();
}
