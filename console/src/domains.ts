import { api, can } from './api.ts';
import { busy, confirmAction, h, pill, say, when, type Child } from './dom.ts';
import { hidden } from './streams.ts';

interface Domain {
  custom_domain_id: string;
  domain: string;
  status: 'pending_verification' | 'ready' | 'failed';
  type: string;
  is_default?: boolean;
  verification: {
    methods: Array<{ name: string; record: string; domain: string }>;
    status?: string;
    error_msg?: string;
    last_verified_at?: string;
  };
}

/** GET /api/v2/custom-domains/{id}/certificate: what TLS serves for the domain. */
interface Certificate {
  status: 'none' | 'dev-ca' | 'upload';
  reason?: 'not_ready' | 'no_certificate_source' | 'not_issued' | 'not_uploaded';
  issuer?: string;
  not_after?: string;
  fingerprint_sha256?: string;
}

const WHY_NONE: Record<NonNullable<Certificate['reason']>, string> = {
  not_ready: 'until the domain is ready',
  no_certificate_source: 'the server has no certificate source for svc-managed domains',
  not_issued: 'one is issued on the first visit',
  not_uploaded: 'no certificate was uploaded for it',
};

/** The certificate's line of a domain card, filled in when the API answers. */
function certificateFact(domain: Domain): HTMLElement {
  const shown = h('dd', { class: 'domain-certificate' }, '…');
  api<Certificate>('GET', `/api/v2/custom-domains/${encodeURIComponent(domain.custom_domain_id)}/certificate`)
    .then((certificate) => {
      if (certificate.status === 'none') {
        const why = certificate.reason ? WHY_NONE[certificate.reason] : undefined;
        shown.replaceChildren(`None: the default certificate is served${why ? ` (${why})` : ''}.`);
        return;
      }
      const source = certificate.status === 'upload' ? 'uploaded' : 'development CA';
      shown.replaceChildren(
        `Issued by ${certificate.issuer ?? '—'}, valid until ${when(certificate.not_after)} (${source}). SHA-256 `,
        h('span', { class: 'mono' }, certificate.fingerprint_sha256 ?? ''),
      );
    })
    .catch((e: Error) => shown.replaceChildren(`Unknown: ${e.message}`));
  return shown;
}

const tone = (status: Domain['status']) => (status === 'ready' ? 'good' : status === 'failed' ? 'bad' : 'warn');

/**
 * The value on the clipboard. The Clipboard API needs a secure context (HTTPS or localhost) and the
 * browser's permission; without them the value is selected instead, for the reader to copy.
 */
async function copy(text: string, what: string, shown: HTMLElement): Promise<void> {
  try {
    if (!navigator.clipboard) throw new Error('no clipboard');
    await navigator.clipboard.writeText(text);
    say(`Copied the ${what}.`);
  } catch {
    getSelection()?.selectAllChildren(shown);
    say(`The ${what} is selected: copy it with Ctrl+C (⌘C).`);
  }
}

function domainCard(domain: Domain, refresh: () => void): HTMLElement {
  const method = domain.verification.methods[0];
  const headingId = `domain-${domain.custom_domain_id}`;
  const controls: Child[] = [];
  if (can('create:custom_domains')) {
    const verify = h('button', { type: 'button', 'aria-describedby': headingId }, 'Verify now');
    verify.addEventListener('click', () =>
      busy(verify, async () => {
        const result = await api<{ status: string; verification?: { error_msg?: string } }>(
          'POST',
          `/api/v2/custom-domains/${encodeURIComponent(domain.custom_domain_id)}/verify`,
        );
        say(
          `${domain.domain}: ${result.status}${result.verification?.error_msg ? ` (${result.verification.error_msg})` : ''}.`,
          result.status === 'failed',
        );
        refresh();
      }),
    );
    controls.push(verify);
  }
  if (can('update:custom_domains') && domain.status === 'ready' && !domain.is_default) {
    const makeDefault = h('button', { type: 'button', 'aria-describedby': headingId }, 'Make default');
    makeDefault.addEventListener('click', () =>
      busy(makeDefault, async () => {
        const ok = await confirmAction(
          `Make ${domain.domain} the default domain? Links and emails will name it from now on.`,
          'Make default',
        );
        if (!ok) return;
        await api('PATCH', '/api/v2/custom-domains/default', { body: { domain: domain.domain } });
        say(`${domain.domain} is the default domain.`);
        refresh();
      }),
    );
    controls.push(makeDefault);
  }
  const value = h('span', {}, method?.record ?? '');
  const record = method
    ? [
        h('dt', {}, 'DNS record to publish'),
        h(
          'dd',
          {},
          h('span', { class: 'mono' }, `${method.domain} ${method.name} "`, value, '"'),
          ' ',
          h(
            'button',
            {
              type: 'button',
              'aria-label': `Copy value of the ${method.name} record for ${domain.domain}`,
              onclick: () => void copy(method.record, `${method.name} record value`, value),
            },
            'Copy value',
          ),
        ),
      ]
    : [];
  return h(
    'section',
    { class: 'domain', 'aria-labelledby': headingId, 'data-domain': domain.domain },
    h('h2', { id: headingId }, domain.domain, domain.is_default ? ' (default)' : ''),
    h(
      'dl',
      { class: 'facts' },
      h('dt', {}, 'Status'),
      h('dd', { class: 'domain-status' }, pill(domain.status, tone(domain.status))),
      h('dt', {}, 'Type'),
      h('dd', {}, domain.type),
      h('dt', {}, 'Certificate'),
      certificateFact(domain),
      ...record,
      h('dt', {}, 'Last check'),
      h(
        'dd',
        {},
        when(domain.verification.last_verified_at),
        domain.verification.error_msg ? ` — ${domain.verification.error_msg}` : '',
      ),
    ),
    controls.length > 0 ? h('div', { class: 'row' }, ...controls) : null,
  );
}

export async function domainsView(): Promise<Child[]> {
  const title = h('h1', {}, 'Custom domains');
  if (!can('read:custom_domains')) return [title, hidden('The list of custom domains', ['read:custom_domains'])];
  const domains = await api<Domain[]>('GET', '/api/v2/custom-domains');
  const refresh = () => window.dispatchEvent(new HashChangeEvent('hashchange'));
  const notes: Child[] = [];
  if (!can('create:custom_domains')) notes.push(hidden('Verifying', ['create:custom_domains']));
  if (!can('update:custom_domains')) notes.push(hidden('Choosing the default domain', ['update:custom_domains']));
  if (domains.length === 0)
    return [title, h('p', {}, 'No custom domains yet. Add one with POST /api/v2/custom-domains.'), ...notes];
  return [title, ...notes, ...domains.map((d) => domainCard(d, refresh))];
}
