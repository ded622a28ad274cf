// Users by email (and a verification email sent to one), segments and the CAPTCHA configuration, with
// their edits: every refusal of the API is shown beside the field it concerns.
import { PROVIDER_IDS, type ProviderId } from '../../src/modules/captcha/providers.ts';
import { api, can } from './api.ts';
import { busy, confirmAction, h, pill, say, when, type Child } from './dom.ts';
import { field, FieldError, submitting } from './forms.ts';
import { hidden } from './streams.ts';

interface User {
  user_id: string;
  email?: string;
  email_verified?: boolean;
  name?: string;
  blocked?: boolean;
  created_at: string;
  identities: Array<{ connection: string }>;
}

export async function usersView(): Promise<Child[]> {
  const title = h('h1', {}, 'Users');
  if (!can('read:users')) return [title, hidden('Looking users up', ['read:users'])];
  const email = h('input', { id: 'user-email', type: 'email', required: true, autocomplete: 'off' });
  const find = h('button', { type: 'submit', class: 'primary' }, 'Find');
  const results = h('div', { 'aria-live': 'polite' });
  const form = h(
    'form',
    { class: 'row', role: 'search', 'aria-label': 'Users by email' },
    h('div', {}, h('label', { for: 'user-email' }, 'Email'), email),
    find,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void busy(find, async () => {
      const users = await api<User[]>('GET', '/api/v2/users-by-email', { query: { email: email.value.trim() } });
      results.replaceChildren(
        users.length === 0
          ? h('p', {}, `No user has the email ${email.value.trim()}.`)
          : h(
              'table',
              {},
              h(
                'thead',
                {},
                h(
                  'tr',
                  {},
                  ...['User', 'Email', 'Connection', 'Created', 'Actions'].map((c) => h('th', { scope: 'col' }, c)),
                ),
              ),
              h('tbody', {}, ...users.map(userRow)),
            ),
      );
    });
  });
  return [title, form, can('update:users') ? null : hidden('Sending verification emails', ['update:users']), results];
}

function userRow(user: User): HTMLElement {
  const actions: Child[] = [];
  if (can('update:users') && user.email && !user.email_verified) {
    const send = h(
      'button',
      { type: 'button', 'aria-label': `Send verification email to ${user.email}` },
      'Send verification email',
    );
    send.addEventListener('click', () =>
      busy(send, async () => {
        if (!(await confirmAction(`Send a verification email to ${user.email}?`, 'Send'))) return;
        const job = await api<{ id: string }>('POST', '/api/v2/jobs/verification-email', {
          body: { user_id: user.user_id },
        });
        say(`Verification email queued (job ${job.id}).`);
      }),
    );
    actions.push(send);
  }
  return h(
    'tr',
    {},
    h('td', { class: 'mono' }, user.user_id, user.blocked ? ' ' : '', user.blocked ? pill('blocked', 'bad') : null),
    h(
      'td',
      {},
      user.email ?? '—',
      ' ',
      user.email
        ? pill(user.email_verified ? 'verified' : 'not verified', user.email_verified ? 'good' : 'warn')
        : null,
    ),
    h('td', {}, user.identities.map((i) => i.connection).join(', ')),
    h('td', {}, when(user.created_at)),
    h('td', {}, ...actions),
  );
}

interface Segment {
  id: string;
  name: string;
  description?: string;
  type: string;
  rules: unknown[];
  updated_at: string;
}

export async function settingsView(): Promise<Child[]> {
  const parts: Child[] = [h('h1', {}, 'Segments and CAPTCHA')];
  parts.push(h('h2', {}, 'Segments'));
  if (!can('read:experimentation')) parts.push(hidden('The list of segments', ['read:experimentation']));
  else {
    const section = h('div', { id: 'segments' });
    await renderSegments(section);
    parts.push(section);
  }
  parts.push(h('h2', {}, 'CAPTCHA'));
  if (!can('read:attack_protection')) parts.push(hidden('The CAPTCHA configuration', ['read:attack_protection']));
  else {
    const section = h('div', { id: 'captcha' });
    await renderCaptcha(section);
    parts.push(section);
  }
  return parts;
}

/** The segments table, its actions, and the form editing one (or a new one) below it. */
async function renderSegments(section: HTMLElement): Promise<void> {
  const { segments, next } = await api<{ segments: Segment[]; next?: string }>(
    'GET',
    '/api/v2/experimentation/segments',
    { query: { take: 50 } },
  );
  const editor = h('div', { id: 'segment-editor' });
  const reload = () => renderSegments(section);
  const own = (s: Segment) => s.type !== 'svc' && s.type !== 'auth0';
  const actions = (s: Segment): Child[] => {
    const out: Child[] = [];
    if (can('update:experimentation') && own(s)) {
      const edit = h('button', { type: 'button', 'aria-label': `Edit segment ${s.name}` }, 'Edit');
      edit.addEventListener('click', () => segmentForm(editor, s, reload));
      out.push(edit, ' ');
    }
    if (can('delete:experimentation') && own(s)) {
      const remove = h(
        'button',
        { type: 'button', class: 'danger', 'aria-label': `Delete segment ${s.name}` },
        'Delete',
      );
      remove.addEventListener('click', () =>
        busy(remove, async () => {
          if (!(await confirmAction(`Delete the segment ${s.name}? This cannot be undone.`, 'Delete'))) return;
          await api('DELETE', `/api/v2/experimentation/segments/${encodeURIComponent(s.id)}`);
          say(`Segment ${s.name} deleted.`);
          await reload();
        }),
      );
      out.push(remove);
    }
    return out;
  };
  const create = can('create:experimentation') ? h('button', { type: 'button' }, 'New segment') : null;
  create?.addEventListener('click', () => segmentForm(editor, undefined, reload));
  section.replaceChildren(
    ...[
      next
        ? h('p', { class: 'muted' }, 'The first 50 segments (GET /api/v2/experimentation/segments pages through all).')
        : null,
      segments.length === 0
        ? h('p', {}, 'No segments.')
        : h(
            'table',
            {},
            h(
              'thead',
              {},
              h('tr', {}, ...['Name', 'Type', 'Rules', 'Updated', 'Actions'].map((c) => h('th', { scope: 'col' }, c))),
            ),
            h(
              'tbody',
              {},
              ...segments.map((s) =>
                h(
                  'tr',
                  { 'data-segment': s.id },
                  h('td', {}, s.name, s.description ? h('div', { class: 'muted' }, s.description) : null),
                  h('td', {}, s.type),
                  h('td', {}, String(s.rules.length)),
                  h('td', {}, when(s.updated_at)),
                  h('td', {}, ...actions(s)),
                ),
              ),
            ),
          ),
      create,
      can('update:experimentation') ? null : hidden('Editing segments', ['update:experimentation']),
      editor,
    ].filter((c): c is HTMLElement => c !== null),
  );
}

/** Edits a segment (PATCH) or creates one (POST); the API's refusals are shown beside their field. */
function segmentForm(editor: HTMLElement, segment: Segment | undefined, reload: () => Promise<void>): void {
  const name = field('segment-name', 'name', 'Name', h('input', { value: segment?.name ?? '', autocomplete: 'off' }));
  const description = field(
    'segment-description',
    'description',
    'Description',
    h('input', { value: segment?.description ?? '', autocomplete: 'off' }),
    'Optional; empty removes it.',
  );
  const rulesInput = h('textarea', { rows: '6', spellcheck: 'false', class: 'mono' });
  rulesInput.value = JSON.stringify(segment?.rules ?? [{ match: { country: ['US'] } }], null, 2);
  const rules = field(
    'segment-rules',
    'rules',
    'Rules (JSON)',
    rulesInput,
    'A list of rules, e.g. [{"match": {"country": ["US"]}}]; the segment matches when any rule does.',
  );
  const fields = [name, description, rules];
  const save = h('button', { type: 'submit', class: 'primary' }, segment ? 'Save segment' : 'Create segment');
  const cancel = h('button', { type: 'button' }, 'Cancel');
  cancel.addEventListener('click', () => editor.replaceChildren());
  const title = segment ? `Edit segment ${segment.name}` : 'New segment';
  const form = h(
    'form',
    { class: 'stacked', 'aria-labelledby': 'segment-form-title', novalidate: true },
    h('h3', { id: 'segment-form-title', tabindex: '-1' }, title),
    ...fields.map((f) => f.element),
    h('div', { class: 'buttons' }, save, cancel),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    save.disabled = true;
    void submitting(
      fields,
      async () => {
        let parsed: unknown;
        try {
          parsed = JSON.parse(rules.control.value);
        } catch (error) {
          throw new FieldError(rules, `The rules are not JSON: ${(error as Error).message}`);
        }
        const text = description.control.value.trim();
        const payload: Record<string, unknown> = { name: name.control.value, rules: parsed };
        if (text !== '') payload.description = text;
        else if (segment?.description !== undefined) payload.description = null;
        const saved = segment
          ? await api<Segment>('PATCH', `/api/v2/experimentation/segments/${encodeURIComponent(segment.id)}`, {
              body: payload,
            })
          : await api<Segment>('POST', '/api/v2/experimentation/segments', { body: payload });
        say(`Segment ${saved.name} ${segment ? 'saved' : 'created'}.`);
        await reload();
      },
      name,
    ).finally(() => (save.disabled = false));
  });
  editor.replaceChildren(form);
  form.querySelector('h3')?.focus();
}

// The server's own list: the console bundles this one module of the server's sources, which imports nothing.
const PROVIDERS = PROVIDER_IDS;
type Provider = ProviderId;

/** Each provider's settings: text, write-only secret, or a checkbox. */
const SETTINGS: Record<Provider, Array<[key: string, kind: 'text' | 'secret' | 'flag', optional?: boolean]>> = {
  simple_captcha: [],
  auth_challenge: [['fail_open', 'flag']],
  recaptcha_v2: [
    ['site_key', 'text'],
    ['secret', 'secret'],
  ],
  recaptcha_enterprise: [
    ['site_key', 'text'],
    ['api_key', 'secret'],
    ['project_id', 'text'],
  ],
  hcaptcha: [
    ['site_key', 'text'],
    ['secret', 'secret'],
  ],
  friendly_captcha: [
    ['site_key', 'text'],
    ['secret', 'secret'],
  ],
  arkose: [
    ['site_key', 'text'],
    ['secret', 'secret'],
    ['client_subdomain', 'text', true],
    ['verify_subdomain', 'text', true],
    ['fail_open', 'flag', true],
  ],
};

type Captcha = Record<string, unknown> & { active_provider_id: string };

async function renderCaptcha(section: HTMLElement): Promise<void> {
  const captcha = await api<Captcha>('GET', '/api/v2/attack-protection/captcha');
  const configured = Object.keys(captcha).filter((k) => k !== 'active_provider_id');
  const facts = h(
    'dl',
    { class: 'facts' },
    h('dt', {}, 'Active provider'),
    h('dd', {}, pill(captcha.active_provider_id, captcha.active_provider_id === 'none' ? 'plain' : 'good')),
    h('dt', {}, 'Configured'),
    h('dd', {}, configured.join(', ') || '—'),
  );
  section.replaceChildren(
    facts,
    can('update:attack_protection')
      ? captchaForm(captcha, () => renderCaptcha(section))
      : hidden('Changing the CAPTCHA configuration', ['update:attack_protection']),
  );
}

function captchaForm(captcha: Captcha, reload: () => Promise<void>): HTMLElement {
  const select = h(
    'select',
    {},
    ...PROVIDERS.map((p) => {
      const option = h('option', { value: p }, p);
      option.selected = p === captcha.active_provider_id;
      return option;
    }),
  );
  const provider = field('captcha-provider', 'active_provider_id', 'Active provider', select);
  const settings = h('div', {});
  let fields: ReturnType<typeof field>[] = [];
  const showSettings = () => {
    const chosen = select.value as Provider;
    const stored = (captcha[chosen] ?? {}) as Record<string, unknown>;
    fields = SETTINGS[chosen].map(([key, kind, optional]) => {
      const id = `captcha-${key}`;
      if (kind === 'flag') {
        const box = h('input', { type: 'checkbox' });
        box.checked = stored[key] === true;
        return field(id, key, key, box);
      }
      const input = h('input', {
        type: kind === 'secret' ? 'password' : 'text',
        autocomplete: kind === 'secret' ? 'new-password' : 'off',
        value: kind === 'secret' ? '' : String(stored[key] ?? ''),
      });
      const hint =
        kind === 'secret'
          ? 'Write-only: never shown again; required when this provider’s settings are saved.'
          : undefined;
      return field(id, key, optional ? `${key} (optional)` : key, input, hint);
    });
    settings.replaceChildren(
      fields.length === 0
        ? h('p', { class: 'muted' }, `${chosen} has no settings.`)
        : h('div', {}, ...fields.map((f) => f.element)),
    );
  };
  select.addEventListener('change', showSettings);
  showSettings();
  const save = h('button', { type: 'submit', class: 'primary' }, 'Save CAPTCHA');
  const form = h(
    'form',
    { class: 'stacked', 'aria-label': 'CAPTCHA configuration', novalidate: true },
    provider.element,
    settings,
    save,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    save.disabled = true;
    const chosen = select.value as Provider;
    const all = [provider, ...fields];
    void submitting(all, async () => {
      const values: Record<string, unknown> = {};
      for (const f of fields) {
        const control = f.control as HTMLInputElement;
        if (control.type === 'checkbox') values[f.key] = control.checked;
        else if (control.value.trim() !== '') values[f.key] = control.value.trim();
      }
      const anyText = fields.some((f) => (f.control as HTMLInputElement).type !== 'checkbox' && f.control.value !== '');
      const sendSettings = SETTINGS[chosen].length > 0 && (anyText || SETTINGS[chosen].every(([, k]) => k === 'flag'));
      const changesProvider = chosen !== captcha.active_provider_id;
      if (
        changesProvider &&
        !(await confirmAction(
          `Make ${chosen} the active CAPTCHA provider instead of ${captcha.active_provider_id}? Sign-ins meet it at once.`,
          'Change provider',
        ))
      )
        return;
      await api('PATCH', '/api/v2/attack-protection/captcha', {
        body: { active_provider_id: chosen, ...(sendSettings ? { [chosen]: values } : {}) },
      });
      say('CAPTCHA configuration saved.');
      await reload();
    }).finally(() => (save.disabled = false));
  });
  return form;
}
