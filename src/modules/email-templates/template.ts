import type { EmailTemplate, TemplateName, UpdateEmailTemplateBody } from './schema.ts';

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

export const DEFAULT_TEMPLATES: Readonly<Record<TemplateName, EmailTemplate>> = { verify_email: DEFAULT_VERIFY_EMAIL };

/** The members a POST or PATCH may change. */
export type TemplateChanges = Omit<UpdateEmailTemplateBody, 'template'>;

/** Members given replace the template's; `null` restores the default's; unset optional members are omitted. */
export function mergeTemplate(base: EmailTemplate, changes: TemplateChanges): EmailTemplate {
  const fallback = DEFAULT_TEMPLATES[base.template];
  const pick = <K extends keyof TemplateChanges & keyof EmailTemplate>(key: K): EmailTemplate[K] => {
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
  for (const key of ['from', 'resultUrl', 'urlLifetimeInSeconds'] as const)
    if (merged[key] === undefined) delete merged[key];
  return merged;
}
