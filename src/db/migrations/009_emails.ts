import type { Kysely } from 'kysely';

/** Email templates, verification tickets, verification-email jobs and the outbox emails are sent from. */
export async function up(db: Kysely<unknown>): Promise<void> {
  // No row: the tenant uses the built-in default of that template.
  await db.schema
    .createTable('email_templates')
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id').onDelete('cascade'))
    .addColumn('template', 'text', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('sender', 'text')
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('syntax', 'text', (c) => c.notNull())
    .addColumn('result_url', 'text')
    .addColumn('url_lifetime_seconds', 'integer')
    .addColumn('include_email_in_redirect', 'integer', (c) => c.notNull())
    .addColumn('enabled', 'integer', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('email_templates_pk', ['tenant_id', 'template'])
    .execute();

  await db.schema
    .createTable('email_outbox')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id').onDelete('cascade'))
    .addColumn('template', 'text', (c) => c.notNull())
    .addColumn('recipient', 'text', (c) => c.notNull())
    .addColumn('sender', 'text', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('body', 'text')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempt_count', 'integer', (c) => c.notNull())
    .addColumn('next_attempt_at', 'text', (c) => c.notNull())
    .addColumn('claimed_until', 'text')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addColumn('sent_at', 'text')
    .execute();
  // The mail worker's poll: due pending emails.
  await db.schema.createIndex('email_outbox_due').on('email_outbox').columns(['status', 'next_attempt_at']).execute();

  await db.schema
    .createTable('jobs')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id').onDelete('cascade'))
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('email_id', 'text', (c) => c.notNull().references('email_outbox.id').onDelete('cascade'))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('email_verification_tickets')
    .addColumn('ticket_hash', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('result_url', 'text')
    .addColumn('include_email_in_redirect', 'integer', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addColumn('used_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    // A deleted user's tickets go with it.
    .addForeignKeyConstraint(
      'email_verification_tickets_user',
      ['tenant_id', 'user_id'],
      'users',
      ['tenant_id', 'user_id'],
      (c) => c.onDelete('cascade'),
    )
    .execute();
}
