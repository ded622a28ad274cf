import type { Selectable } from 'kysely';
import { isUniqueViolation, type Database } from '../../db/database.ts';
import type { EmailTemplatesTable } from '../../db/schema.ts';
import type { EmailTemplate, TemplateName } from './schema.ts';

type Row = Selectable<EmailTemplatesTable>;

function toTemplate(row: Row): EmailTemplate {
  return {
    template: row.template as TemplateName,
    body: row.body,
    ...(row.sender === null ? {} : { from: row.sender }),
    ...(row.result_url === null ? {} : { resultUrl: row.result_url }),
    subject: row.subject,
    syntax: row.syntax,
    ...(row.url_lifetime_seconds === null ? {} : { urlLifetimeInSeconds: row.url_lifetime_seconds }),
    includeEmailInRedirect: row.include_email_in_redirect === 1,
    enabled: row.enabled === 1,
  };
}

function toRow(tenantId: string, template: EmailTemplate, at: string): Row {
  return {
    tenant_id: tenantId,
    template: template.template,
    body: template.body,
    sender: template.from ?? null,
    subject: template.subject,
    syntax: 'liquid',
    result_url: template.resultUrl ?? null,
    url_lifetime_seconds: template.urlLifetimeInSeconds ?? null,
    include_email_in_redirect: template.includeEmailInRedirect ? 1 : 0,
    enabled: template.enabled ? 1 : 0,
    updated_at: at,
  };
}

/** Every query on email_templates, for both dialects: the templates a tenant stored as its own. */
export class EmailTemplateStore {
  constructor(private readonly database: Database) {}

  async get(tenantId: string, name: TemplateName): Promise<EmailTemplate | undefined> {
    const row = await this.database.db
      .selectFrom('email_templates')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('template', '=', name)
      .executeTakeFirst();
    return row && toTemplate(row);
  }

  /** The templates the tenant stored as its own, by name. */
  async own(tenantId: string): Promise<EmailTemplate[]> {
    const rows = await this.database.db
      .selectFrom('email_templates')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .orderBy('template')
      .execute();
    return rows.map(toTemplate);
  }

  /** False when the tenant already has its own template by that name. */
  async insert(tenantId: string, template: EmailTemplate, at: string): Promise<boolean> {
    try {
      await this.database.db
        .insertInto('email_templates')
        .values(toRow(tenantId, template, at))
        .execute();
      return true;
    } catch (error) {
      if (isUniqueViolation(error)) return false;
      throw error;
    }
  }

  /**
   * Changes the tenant's template in one transaction: `initial` is stored first when the tenant has
   * none, so the row exists to lock and concurrent changes apply one after another; `change` is given
   * the stored template and its result is stored.
   */
  async update(
    tenantId: string,
    initial: EmailTemplate,
    change: (current: EmailTemplate) => EmailTemplate,
    at: string,
  ): Promise<EmailTemplate> {
    const name = initial.template;
    return this.database.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('email_templates')
        .values(toRow(tenantId, initial, at))
        .onConflict((oc) => oc.columns(['tenant_id', 'template']).doNothing())
        .execute();
      const row = await trx
        .selectFrom('email_templates')
        .selectAll()
        .where('tenant_id', '=', tenantId)
        .where('template', '=', name)
        .$if(this.database.dialect === 'postgres', (q) => q.forUpdate())
        .executeTakeFirstOrThrow();
      const template = change(toTemplate(row));
      const { tenant_id: _tenant, template: _name, ...set } = toRow(tenantId, template, at);
      await trx
        .updateTable('email_templates')
        .set(set)
        .where('tenant_id', '=', tenantId)
        .where('template', '=', name)
        .execute();
      return template;
    });
  }
}
