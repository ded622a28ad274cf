import { api, can } from './api.ts';
import { busy, h, pill, say, when, type Child } from './dom.ts';
import { emailFrame, field, submitting } from './forms.ts';
import { hidden } from './streams.ts';

interface Email {
  id: string;
  template: string;
  to: string;
  subject: string;
  status: 'pending' | 'sent' | 'failed';
  attempts: number;
  last_error?: string;
  created_at: string;
  sent_at?: string;
  next_attempt_at?: string;
}

interface Message {
  id: string;
  from: string;
  to: string;
  subject: string;
  date: string;
  message_id: string;
  headers: Array<{ name: string; value: string }>;
  html: string;
}

const tone = (status: Email['status']) => (status === 'sent' ? 'good' : status === 'failed' ? 'bad' : 'warn');

/** The mail outbox: what was sent, what waits, what failed and why (never a body: it holds a link). */
export async function emailsView(): Promise<Child[]> {
  const title = h('h1', {}, 'Emails');
  if (!can('read:email_outbox')) return [title, hidden('The mail outbox', ['read:email_outbox'])];
  const status = h(
    'select',
    { id: 'email-status' },
    h('option', { value: '' }, 'Any status'),
    ...['pending', 'sent', 'failed'].map((s) => h('option', { value: s }, s)),
  );
  const tbody = h('tbody', {});
  const more = h('button', { type: 'button', hidden: true }, 'Load more');
  const empty = h('p', { class: 'muted', hidden: true }, 'No emails.');
  const reader = h('div', { id: 'message' });
  const canOpen = can('read:email_messages');
  let cursor: string | undefined;
  const load = async (reset: boolean) => {
    if (reset) {
      cursor = undefined;
      tbody.replaceChildren();
    }
    const page = await api<{ emails: Email[]; next?: string }>('GET', '/api/v2/emails/outbox', {
      query: { status: status.value || undefined, take: 50, from: cursor },
    });
    for (const email of page.emails)
      tbody.append(
        h(
          'tr',
          { 'data-email': email.id },
          h('td', {}, when(email.created_at)),
          h('td', {}, email.to),
          h('td', {}, email.subject),
          h('td', {}, email.template),
          h('td', {}, pill(email.status, tone(email.status))),
          h(
            'td',
            {},
            email.status === 'sent'
              ? `sent ${when(email.sent_at)}`
              : `${email.attempts} attempt${email.attempts === 1 ? '' : 's'}`,
            email.next_attempt_at ? `, next ${when(email.next_attempt_at)}` : '',
            email.last_error ? ` — ${email.last_error}` : '',
          ),
          canOpen
            ? h(
                'td',
                {},
                email.status === 'sent' ? openButton(email, reader) : h('span', { class: 'muted' }, 'not sent'),
              )
            : null,
        ),
      );
    cursor = page.next;
    more.hidden = cursor === undefined;
    empty.hidden = tbody.childElementCount > 0;
  };
  status.addEventListener('change', () => void load(true).catch((e: Error) => say(e.message, true)));
  more.addEventListener('click', () => void busy(more, () => load(false)));
  await load(true);
  return [
    title,
    h(
      'p',
      { class: 'muted' },
      'Emails the server sent or is sending for this tenant, newest first. Without SMTP the server keeps sent emails in its development mailbox: open one to see it as sent (its link is a credential; opening needs read:email_messages).',
    ),
    canOpen ? null : hidden('Opening emails of the development mailbox', ['read:email_messages']),
    h('div', { class: 'row' }, h('div', {}, h('label', { for: 'email-status' }, 'Status'), status)),
    h(
      'table',
      {},
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ...['Queued', 'To', 'Subject', 'Template', 'Status', 'Delivery', ...(canOpen ? ['Message'] : [])].map((c) =>
            h('th', { scope: 'col' }, c),
          ),
        ),
      ),
      tbody,
    ),
    empty,
    more,
    reader,
    ...(can('read:email_templates')
      ? await templatePreview()
      : [h('h2', {}, 'Verification email'), hidden('The template preview', ['read:email_templates'])]),
  ];
}

function openButton(email: Email, reader: HTMLElement): HTMLButtonElement {
  const open = h('button', { type: 'button', 'aria-label': `Open the email to ${email.to}` }, 'Open');
  open.addEventListener('click', () =>
    busy(open, async () => {
      const message = await api<Message>('GET', `/api/v2/emails/outbox/${encodeURIComponent(email.id)}/message`);
      showMessage(message, reader);
    }),
  );
  return open;
}

/** An email of the development mailbox: its headers beside its body, in a sandboxed frame. */
function showMessage(message: Message, reader: HTMLElement): void {
  const heading = h('h2', { id: 'message-title', tabindex: '-1' }, `Email: ${message.subject}`);
  const close = h('button', { type: 'button' }, 'Close email');
  close.addEventListener('click', () => reader.replaceChildren());
  reader.replaceChildren(
    h(
      'section',
      { class: 'message', 'aria-labelledby': 'message-title', 'data-message': message.id },
      heading,
      h(
        'div',
        { class: 'message-parts' },
        h(
          'dl',
          { class: 'facts headers', 'aria-label': 'Headers' },
          ...message.headers.flatMap((header) => [h('dt', {}, header.name), h('dd', {}, header.value)]),
        ),
        emailFrame(message.html, `Body of the email to ${message.to}`),
      ),
      close,
    ),
  );
  heading.focus();
}

interface Template {
  body: string;
  subject: string;
  from?: string;
}

interface Preview {
  domain: string;
  from: string;
  to: string;
  subject: string;
  body: string;
  url: string;
}

/**
 * The verification email as the server would send it, for a sample user and a placeholder link, on the
 * default domain or a chosen ready custom domain; edits are previewed without being saved.
 */
async function templatePreview(): Promise<Child[]> {
  const template = await api<Template>('GET', '/api/v2/email-templates/verify_email');
  const domains = can('read:custom_domains')
    ? await api<Array<{ domain: string; status: string; is_default?: boolean }>>('GET', '/api/v2/custom-domains')
    : [];
  const subject = field('tpl-subject', 'subject', 'Subject', h('input', { value: template.subject }));
  const from = field(
    'tpl-from',
    'from',
    'From',
    h('input', { value: template.from ?? '', placeholder: 'no-reply@ the domain' }),
    'Empty: the server’s sender (MAIL_FROM, or no-reply@ the domain).',
  );
  const bodyInput = h('textarea', { rows: '8', spellcheck: 'false', class: 'mono' });
  bodyInput.value = template.body;
  const body = field('tpl-body', 'body', 'Body (Liquid, HTML)', bodyInput);
  const domain = field(
    'tpl-domain',
    'domain',
    'Domain',
    h(
      'select',
      {},
      h('option', { value: '' }, 'The default domain'),
      ...domains.filter((d) => d.status === 'ready').map((d) => h('option', { value: d.domain }, d.domain)),
    ),
    can('read:custom_domains')
      ? 'Ready custom domains only, as for real emails.'
      : 'Custom domains need read:custom_domains.',
  );
  const fields = [subject, from, body, domain];
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Preview');
  const result = h('div', { id: 'preview', 'aria-live': 'polite' });
  const form = h(
    'form',
    { class: 'stacked', 'aria-labelledby': 'preview-title' },
    ...fields.map((f) => f.element),
    submit,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    submit.disabled = true;
    void submitting(fields, async () => {
      const chosen = domain.control.value;
      const preview = await api<Preview>('POST', '/api/v2/email-templates/verify_email/preview', {
        body: {
          subject: subject.control.value,
          body: body.control.value,
          ...(from.control.value.trim() ? { from: from.control.value.trim() } : {}),
        },
        headers: chosen ? { 'svc-custom-domain': chosen } : {},
      });
      result.replaceChildren(
        h(
          'div',
          { class: 'message-parts' },
          h(
            'dl',
            { class: 'facts headers', 'aria-label': 'Preview headers' },
            ...[
              ['Domain', preview.domain],
              ['From', preview.from],
              ['To', preview.to],
              ['Subject', preview.subject],
              ['Link', preview.url],
            ].flatMap(([name, value]) => [h('dt', {}, name), h('dd', {}, value)]),
          ),
          emailFrame(preview.body, `Preview of the verification email on ${preview.domain}`),
        ),
      );
      say(`Preview rendered for ${preview.domain}.`);
    }).finally(() => (submit.disabled = false));
  });
  return [
    h('h2', { id: 'preview-title' }, 'Verification email preview'),
    h(
      'p',
      { class: 'muted' },
      'Rendered by the server as it would send it, for a sample user; the link is a placeholder, not a ticket. Nothing is saved.',
    ),
    form,
    result,
  ];
}
