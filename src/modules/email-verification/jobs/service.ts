import type { Readable } from 'node:stream';
import type { Database } from '../../../db/database.ts';
import { now, transaction } from '../../../db/database.ts';
import { emailVerificationErrors } from '../../../http/errors.ts';
import { newId } from '../../../ids.ts';
import type { EmailStatus, MailOutbox } from '../../../mail/outbox.ts';
import type { Tenant } from '../../tenants/service.ts';
import type { UserService } from '../../users/service.ts';
import type { UsersImportService } from '../../users-imports/service.ts';
import type { UsersImportJob } from '../../users-imports/schema.ts';
import type { DomainContext } from '../domain-context.ts';
import { requireEmail } from '../recipient.ts';
import type { VerificationEmailService } from '../service.ts';
import type { Job, VerificationEmailJobBody } from './schema.ts';
import { JobStore } from './store.ts';

/** A verification-email job is its email: pending until the mail server took it, then completed, or failed. */
export const JOB_STATUS: Readonly<Record<EmailStatus, Job['status']>> = {
  pending: 'pending',
  sent: 'completed',
  failed: 'failed',
};

/**
 * Jobs of the original's /jobs API, one id space: verification-email jobs (here; a job is its email,
 * its status follows the outbox) and users-import jobs (the users-imports module).
 */
export class JobService {
  private readonly store: JobStore;

  constructor(
    private readonly database: Database,
    private readonly users: Pick<UserService, 'get'>,
    private readonly verificationEmails: Pick<VerificationEmailService, 'template' | 'prepare'>,
    private readonly outbox: Pick<MailOutbox, 'status'>,
    private readonly usersImports: Pick<UsersImportService, 'get' | 'errors'>,
  ) {
    this.store = new JobStore(database);
  }

  async createVerificationEmail(tenant: Tenant, body: VerificationEmailJobBody, context: DomainContext): Promise<Job> {
    const user = await this.users.get(tenant.id, body.user_id, {
      fields: [],
      includeFields: true,
      withIdpTokens: false,
    });
    const email = requireEmail(user);
    const template = await this.verificationEmails.template(tenant.id);
    if (!template) throw emailVerificationErrors.templateDisabled();
    const job: Job = { status: 'pending', type: 'verification_email', created_at: now(), id: newId.job() };
    const queue = await this.verificationEmails.prepare(
      tenant,
      { ...user, user_id: body.user_id, email },
      template,
      context,
    );
    await transaction(this.database, async (trx) => {
      const emailId = await queue(trx);
      await this.store.insert(trx, {
        id: job.id,
        tenant_id: tenant.id,
        type: job.type,
        email_id: emailId,
        created_at: job.created_at,
      });
    });
    return job;
  }

  async get(tenantId: string, id: string): Promise<Job | UsersImportJob> {
    const job = (await this.verificationEmailJob(tenantId, id)) ?? (await this.usersImports.get(tenantId, id));
    if (!job) throw emailVerificationErrors.inexistentJob();
    return job;
  }

  /**
   * GET /jobs/{id}/errors: a users import's refused records (none: undefined, a 204), or the job itself
   * when it failed as a whole; a verification-email job has no record errors, only its failure.
   */
  async errors(tenantId: string, id: string): Promise<Readable | Job | UsersImportJob | undefined> {
    const job = await this.verificationEmailJob(tenantId, id);
    if (job) return job.status === 'failed' ? job : undefined;
    const errors = await this.usersImports.errors(tenantId, id);
    if (errors === undefined) throw emailVerificationErrors.inexistentJob();
    return Array.isArray(errors) ? undefined : errors;
  }

  private async verificationEmailJob(tenantId: string, id: string): Promise<Job | undefined> {
    const record = await this.store.get(tenantId, id);
    const status = record && (await this.outbox.status(tenantId, record.email_id));
    if (!record || !status) return undefined;
    return { status: JOB_STATUS[status], type: record.type, created_at: record.created_at, id: record.id };
  }
}
