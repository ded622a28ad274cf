import type { Database } from '../../db/database.ts';
import { now } from '../../db/database.ts';
import { emailTemplateErrors } from '../../http/errors.ts';
import { checkTemplates } from './liquid.ts';
import type { TemplateRenderer } from './renderer.ts';
import type { CreateEmailTemplateBody, EmailTemplate, TemplateName, UpdateEmailTemplateBody } from './schema.ts';
import { EmailTemplateStore } from './store.ts';
import { DEFAULT_TEMPLATES, mergeTemplate, type TemplateChanges } from './template.ts';

/**
 * Email templates. A tenant uses the built-in default of a template until it stores its own (POST the
 * first time, or PATCH, which starts from the default). A template that does not render is never saved.
 */
export class EmailTemplateService {
  private readonly store: EmailTemplateStore;

  constructor(
    database: Database,
    private readonly renderer: TemplateRenderer,
  ) {
    this.store = new EmailTemplateStore(database);
  }

  async get(tenantId: string, name: TemplateName): Promise<EmailTemplate> {
    return (await this.store.get(tenantId, name)) ?? DEFAULT_TEMPLATES[name];
  }

  /** The templates the tenant made its own (the built-in defaults left out). */
  async own(tenantId: string): Promise<EmailTemplate[]> {
    return this.store.own(tenantId);
  }

  /** 201 when the tenant has no template of its own by that name yet; 409 once it has. */
  async create(tenantId: string, input: CreateEmailTemplateBody): Promise<EmailTemplate> {
    const { template: name, ...changes } = input;
    await this.checkChanges(tenantId, changes);
    const template = mergeTemplate(DEFAULT_TEMPLATES[name], changes);
    if (!(await this.store.insert(tenantId, template, now()))) throw emailTemplateErrors.exists(name);
    return template;
  }

  async update(tenantId: string, name: TemplateName, input: UpdateEmailTemplateBody): Promise<EmailTemplate> {
    // The body's `template`, if sent, is validated to be a supported name, i.e. the path's.
    const { template: _named, ...changes } = input;
    await this.checkChanges(tenantId, changes);
    return this.store.update(tenantId, DEFAULT_TEMPLATES[name], (current) => mergeTemplate(current, changes), now());
  }

  /** Liquid members given are checked before anything is stored. */
  private checkChanges(tenantId: string, { body, subject, from }: TemplateChanges): Promise<void> {
    return checkTemplates(
      this.renderer,
      {
        ...(typeof body === 'string' ? { body } : {}),
        ...(typeof subject === 'string' ? { subject } : {}),
        ...(typeof from === 'string' ? { from } : {}),
      },
      tenantId,
    );
  }
}
