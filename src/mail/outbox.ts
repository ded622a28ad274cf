import type { Tx } from '../db/database.ts';
import { now } from '../db/database.ts';
import { newId } from '../ids.ts';
import type { SecretBox } from '../secret-box.ts';

export interface QueuedEmail {
  tenantId: string;
  /** The template it was rendered from, e.g. `verify_email`. */
  template: string;
  from: string;
  to: string;
  subject: string;
  html: string;
  /** Set when the email could not even be rendered: it is recorded failed with this reason, and never sent. */
  failure?: string;
}

/**
 * Queues an email in the transaction of the change that sends it: if that change rolls back, no email
 * exists; once it commits, the mail worker sends it (at least once). The body holds a verification
 * link, so it is sealed at rest.
 */
export async function queueEmail(trx: Tx, secretBox: SecretBox, email: QueuedEmail): Promise<string> {
  const id = newId.email();
  const at = now();
  await trx
    .insertInto('email_outbox')
    .values({
      id,
      tenant_id: email.tenantId,
      template: email.template,
      recipient: email.to,
      sender: email.from,
      subject: email.subject,
      body: email.failure === undefined ? secretBox.seal(email.html) : null,
      status: email.failure === undefined ? 'pending' : 'failed',
      attempt_count: 0,
      next_attempt_at: at,
      claimed_until: null,
      last_error: email.failure ?? null,
      created_at: at,
      updated_at: at,
      sent_at: null,
    })
    .execute();
  return id;
}
