import type { Selectable } from 'kysely';
import type { Database } from '../../db/database.ts';
import { now, uniqueOr } from '../../db/database.ts';
import type { EmailTemplatesTable } from '../../db/schema.ts';
import { conflict } from '../../http/errors.ts';
import { checkTemplates } from './liquid.ts';
import type { TemplateRenderer } from './renderer.ts';
import type { CreateEmailTemplateBody, EmailTemplate, TemplateName, UpdateEmailTemplateBody } from './schema.ts';

/**
 * The template every tenant starts with. It does not use `custom_domain.domain`, so its text is the
 * same on every domain; only the link in it follows the domain the email is sent for.
 */
const DEFAULT_VERIFY_EMAIL: EmailTemplate = {
  template: 'verify_email',
  body: [
    '<html>',
    '  <body>',
    '    <p>Hello {{ user.name }},</p>',
    '    <p>Please confirm that {{ user.email }} is your email address:</p>',
    '    <p><a href="{{ url }}">Verify my email</a></p>',
    '    <p>If you did not ask for this, you can ignore this email.</p>',
    '  </body>',
    '</html>',
  ].join('\n'),
  subject: 'Verify your email',
  syntax: 'liquid',
  includeEmailInRedirect: true,
  enabled: true,
};

const DEFAULTS: Record<TemplateName, EmailTemplate> = { verify_email: DEFAULT_VERIFY_EMAIL };

type Row = Selectable<EmailTemplatesTable>;
type Changes = Omit<UpdateEmailTemplateBody, 'template'>;

function present(row: Row): EmailTemplate {
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

/** Members given replace the template's; `null` restores the default's. */
function merge(base: EmailTemplate, changes: Changes): EmailTemplate {
  const fallback = DEFAULTS[base.template];
  const pick = <K extends keyof Changes & keyof EmailTemplate>(key: K): EmailTemplate[K] => {
    const value = changes[key];
    if (value === undefined) return base[key];
    return (value === null ? fallback[key] : value) as EmailTemplate[K];
  };
  const merged: EmailTemplate = {
    template: base.template,
    body: pick('body'),
    from: pick('from'),
    resultUrl: pick('resultUrl'),
    subject: pick('subject'),
    syntax: 'liquid',
    urlLifetimeInSeconds: pick('urlLifetimeInSeconds'),
    includeEmailInRedirect: pick('includeEmailInRedirect'),
    enabled: pick('enabled'),
  };
  for (const key of ['from', 'resultUrl', 'urlLifetimeInSeconds'] as const) if (merged[key] === undefined) delete merged[key];
  return merged;
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

/**
 * Email templates. A tenant uses the built-in default of a template until it stores its own (POST the
 * first time, or PATCH, which starts from the default).
 */
export class EmailTemplateService {
  constructor(
    private readonly database: Database,
    private readonly renderer: TemplateRenderer,
  ) {}

  async get(tenantId: string, name: TemplateName): Promise<EmailTemplate> {
    const row = await this.database.db
      .selectFrom('email_templates')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('template', '=', name)
      .executeTakeFirst();
    return row ? present(row) : DEFAULTS[name];
  }

  /** 201 when the tenant has no template of its own by that name yet; 409 once it has. */
  async create(tenantId: string, input: CreateEmailTemplateBody): Promise<EmailTemplate> {
    const { template: name, ...changes } = input;
    await this.checkChanges(changes);
    const template = merge(DEFAULTS[name], changes);
    const insert = this.database.db.insertInto('email_templates').values(toRow(tenantId, template, now())).execute();
    await uniqueOr(insert, () => conflict(`Template ${name} already exists.`));
    return template;
  }

  async update(tenantId: string, name: TemplateName, input: UpdateEmailTemplateBody): Promise<EmailTemplate> {
    // The body's `template`, if sent, is validated to be a supported name, i.e. the path's.
    const { template: _named, ...changes } = input;
    await this.checkChanges(changes);
    return this.database.db.transaction().execute(async (trx) => {
      const at = now();
      // The default is stored first, so the row exists to lock: concurrent PATCHes apply one after another.
      await trx
        .insertInto('email_templates')
        .values(toRow(tenantId, DEFAULTS[name], at))
        .onConflict((oc) => oc.columns(['tenant_id', 'template']).doNothing())
        .execute();
      const row = await trx
        .selectFrom('email_templates')
        .selectAll()
        .where('tenant_id', '=', tenantId)
        .where('template', '=', name)
        .$if(this.database.dialect === 'postgres', (q) => q.forUpdate())
        .executeTakeFirstOrThrow();
      const template = merge(present(row), changes);
      const { tenant_id: _tenant, template: _name, ...set } = toRow(tenantId, template, at);
      await trx.updateTable('email_templates').set(set).where('tenant_id', '=', tenantId).where('template', '=', name).execute();
      return template;
    });
  }

  /** Liquid members given are checked before anything is stored: a template that does not render is never saved. */
  private checkChanges({ body, subject, from }: Changes): Promise<void> {
    return checkTemplates(this.renderer, {
      ...(typeof body === 'string' ? { body } : {}),
      ...(typeof subject === 'string' ? { subject } : {}),
      ...(typeof from === 'string' ? { from } : {}),
    });
  }
}
