import type { Database } from '../../../db/database.ts';
import { now } from '../../../db/database.ts';
import type { EmailOutboxTable } from '../../../db/schema.ts';
import { ApiError } from '../../../http/errors.ts';
import { newId } from '../../../ids.ts';
import type { DomainContext } from '../domain-context.ts';
import { requireEmail, type VerificationEmailService } from '../service.ts';
import type { Tenant } from '../../tenants/service.ts';
import type { UserService } from '../../users/service.ts';
import type { Job, VerificationEmailJobBody } from './schema.ts';

const STATUS: Record<EmailOutboxTable['status'], Job['status']> = { pending: 'pending', sent: 'completed', failed: 'failed' };

const jobNotFound = () => new ApiError(404, 'The job does not exist.', 'inexistent_job');

/** Jobs of the original's /jobs API. A verification-email job is its email: its status follows the outbox. */
export class JobService {
  constructor(
    private readonly database: Database,
    private readonly users: UserService,
    private readonly verificationEmails: VerificationEmailService,
  ) {}

  async createVerificationEmail(tenant: Tenant, body: VerificationEmailJobBody, context: DomainContext): Promise<Job> {
    const user = await this.users.get(tenant.id, body.user_id, { fields: [], includeFields: true, withIdpTokens: false });
    const email = requireEmail(user);
    const template = await this.verificationEmails.template(tenant.id);
    if (!template) throw new ApiError(400, 'The verify_email template is disabled.', 'operation_not_supported');
    const job: Job = { status: 'pending', type: 'verification_email', created_at: now(), id: newId.job() };
    const queue = await this.verificationEmails.prepare(tenant, { ...user, user_id: body.user_id, email }, template, context);
    await this.database.db.transaction().execute(async (trx) => {
      const emailId = await queue(trx);
      await trx.insertInto('jobs').values({ id: job.id, tenant_id: tenant.id, type: job.type, email_id: emailId, created_at: job.created_at }).execute();
    });
    return job;
  }

  async get(tenantId: string, id: string): Promise<Job> {
    const row = await this.database.db
      .selectFrom('jobs')
      .innerJoin('email_outbox', 'email_outbox.id', 'jobs.email_id')
      .select(['jobs.id', 'jobs.type', 'jobs.created_at', 'email_outbox.status'])
      .where('jobs.tenant_id', '=', tenantId)
      .where('jobs.id', '=', id)
      .executeTakeFirst();
    if (!row) throw jobNotFound();
    return { status: STATUS[row.status], type: row.type, created_at: row.created_at, id: row.id };
  }
}
