import { api, can } from './api.ts';
import { deliveryChart, type Bucket } from './chart.ts';
import { busy, confirmAction, h, pill, say, when, type Child } from './dom.ts';

interface Stream {
  id: string;
  name?: string;
  status: 'enabled' | 'disabled';
  status_reason?: string;
  subscriptions: Array<{ event_type: string }>;
  destination: { type: string; configuration: { webhook_endpoint?: string } };
  created_at: string;
}

/** GET …/stats: the original's buckets and metrics (index for index), with Tenantry's backlog and health. */
interface Stats {
  window: { date_from: string; date_to: string; bucket_interval: { scale_factor: number } };
  buckets: string[];
  metrics: Array<{ name: string; data: number[] }>;
  backlog: { pending: number; oldest_due_at?: string };
  health: { consecutive_failures: number; circuit_open_until?: string };
}

/** The minutes of an answer asked with scale_factor 60 that hold attempts, as the chart draws them. */
function minutesOf(stats: Stats): Bucket[] {
  const data = (suffix: string) => stats.metrics.find((m) => m.name.endsWith(suffix))?.data ?? [];
  const delivered = data('.successful_deliveries');
  const failed = data('.failed_deliveries');
  return stats.buckets
    .map((time, i) => ({ time, delivered: delivered[i] ?? 0, failed: failed[i] ?? 0 }))
    .filter((b) => b.delivered + b.failed > 0);
}

/** A window of whole minutes ending with the current one, in the query GET …/stats takes. */
function lastMinutes(minutes: number): Record<string, string | number> {
  const now = Date.now();
  return {
    scale_factor: 60,
    date_from: new Date(now - minutes * 60_000).toISOString(),
    date_to: new Date(now).toISOString(),
  };
}

interface Attempt {
  status: string;
  error_message?: string;
  timestamp: string;
  duration?: number;
}

/** One attempt as GET …/event-streams/{id}/attempts lists it. */
interface LiveAttempt extends Attempt {
  event_id: string;
  event_type: string;
  seq: number;
}

interface Delivery {
  id: string;
  event_type: string;
  status: string;
  attempts: Attempt[];
  event: { time?: string };
}

const streamPath = (id: string) => `/api/v2/event-streams/${encodeURIComponent(id)}`;

/** A view the signed-in client may not see: said so, with the scopes that would show it. */
export function hidden(what: string, scopes: string[]): HTMLElement {
  return h(
    'p',
    { class: 'notice' },
    `${what} is hidden: this client's token has none of the scopes ${scopes.join(', ')}.`,
  );
}

function health(stats: Stats | undefined, stream: Stream): HTMLElement {
  if (stream.status === 'disabled') return pill(stream.status_reason ? 'disabled by the server' : 'disabled', 'warn');
  if (!stats) return pill('unknown');
  const open = stats.health.circuit_open_until && Date.parse(stats.health.circuit_open_until) > Date.now();
  if (open) return pill('paused: failing', 'bad');
  if (stats.health.consecutive_failures > 0)
    return pill(`${stats.health.consecutive_failures} failing in a row`, 'bad');
  return pill('healthy', 'good');
}

export async function streamsView(): Promise<Child[]> {
  const title = h('h1', {}, 'Event streams');
  if (!can('read:event_streams')) return [title, hidden('The list of event streams', ['read:event_streams'])];
  const streams = await api<{ eventStreams: Stream[]; next?: string }>('GET', '/api/v2/event-streams', {
    query: { take: 100 },
  });
  const list = streams.eventStreams;
  // Eight at a time: a hundred streams must not spend the tenant's rate limit in one burst.
  const stats: Array<Stats | undefined> = [];
  for (let i = 0; i < list.length; i += 8) {
    const batch = list.slice(i, i + 8);
    stats.push(
      ...(await Promise.all(
        // The list shows backlog and health only: the shortest window keeps the answer small.
        batch.map((s) =>
          api<Stats>('GET', `${streamPath(s.id)}/stats`, { query: lastMinutes(1) }).catch(() => undefined),
        ),
      )),
    );
  }
  if (list.length === 0)
    return [title, h('p', {}, 'No event streams yet. Create one with POST /api/v2/event-streams.')];
  const rows = list.map((stream, i) =>
    h(
      'tr',
      {},
      h('td', {}, h('a', { href: `#/streams/${encodeURIComponent(stream.id)}` }, stream.name ?? stream.id)),
      h('td', {}, pill(stream.status, stream.status === 'enabled' ? 'good' : 'warn')),
      h('td', {}, health(stats[i], stream)),
      h('td', {}, stats[i] ? String(stats[i]!.backlog.pending) : '—'),
      h('td', { class: 'mono' }, stream.destination.configuration.webhook_endpoint ?? stream.destination.type),
    ),
  );
  return [
    title,
    streams.next ? h('p', { class: 'muted' }, 'The first 100 streams.') : null,
    h(
      'table',
      {},
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', { scope: 'col' }, 'Name'),
          h('th', { scope: 'col' }, 'Status'),
          h('th', { scope: 'col' }, 'Health'),
          h('th', { scope: 'col' }, 'Backlog'),
          h('th', { scope: 'col' }, 'Destination'),
        ),
      ),
      h('tbody', {}, ...rows),
    ),
  ];
}

/** `datetime-local` input value → the API's date-time (whole seconds, UTC). */
function isoOf(local: string): string | undefined {
  if (!local) return undefined;
  const date = new Date(local);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export async function streamView(id: string): Promise<Child[]> {
  if (!can('read:event_streams')) return [h('h1', {}, 'Event stream'), hidden('This stream', ['read:event_streams'])];
  const stream = await api<Stream>('GET', streamPath(id));
  const title = h('h1', {}, `Event stream ${stream.name ?? stream.id}`);
  const parts: Child[] = [
    h('p', {}, h('a', { href: '#/streams' }, '← All event streams')),
    title,
    h(
      'dl',
      { class: 'facts' },
      h('dt', {}, 'ID'),
      h('dd', { class: 'mono' }, stream.id),
      h('dt', {}, 'Status'),
      h(
        'dd',
        {},
        pill(stream.status, stream.status === 'enabled' ? 'good' : 'warn'),
        stream.status_reason ? ` ${stream.status_reason}` : '',
      ),
      h('dt', {}, 'Destination'),
      h('dd', { class: 'mono' }, stream.destination.configuration.webhook_endpoint ?? stream.destination.type),
      h('dt', {}, 'Subscriptions'),
      h('dd', {}, stream.subscriptions.map((s) => s.event_type).join(', ') || '—'),
    ),
  ];
  parts.push(...actions(stream));
  parts.push(await statsSection(stream));
  parts.push(deliveriesSection(stream));
  parts.push(liveSection(stream));
  return parts;
}

function actions(stream: Stream): Child[] {
  if (!can('update:event_streams'))
    return [hidden('Sending test events and enabling or disabling the stream', ['update:event_streams'])];
  const toggle = h(
    'button',
    { type: 'button', class: stream.status === 'enabled' ? 'danger' : '' },
    stream.status === 'enabled' ? 'Disable stream' : 'Enable stream',
  );
  toggle.addEventListener('click', () =>
    busy(toggle, async () => {
      const next = stream.status === 'enabled' ? 'disabled' : 'enabled';
      const question =
        next === 'disabled'
          ? 'Disable this stream? Its events stop being delivered until it is enabled again.'
          : 'Enable this stream? Deliveries resume.';
      if (!(await confirmAction(question, next === 'disabled' ? 'Disable' : 'Enable'))) return;
      await api('PATCH', streamPath(stream.id), { body: { status: next } });
      say(`Stream ${next}.`);
      window.dispatchEvent(new HashChangeEvent('hashchange'));
    }),
  );
  const types = stream.subscriptions.length > 0 ? stream.subscriptions.map((s) => s.event_type) : ['user.created'];
  const type = h('select', { id: 'test-type' }, ...types.map((t) => h('option', { value: t }, t)));
  const send = h('button', { type: 'button' }, 'Send test event');
  send.addEventListener('click', () =>
    busy(send, async () => {
      await api('POST', `${streamPath(stream.id)}/test`, { body: { event_type: type.value } });
      say(`Test ${type.value} event queued.`);
    }),
  );
  return [
    h('h2', {}, 'Actions'),
    h('div', { class: 'row' }, h('div', {}, h('label', { for: 'test-type' }, 'Test event type'), type), send, toggle),
  ];
}

async function statsSection(stream: Stream): Promise<HTMLElement> {
  const section = h('section', { 'aria-labelledby': 'stats-title' }, h('h2', { id: 'stats-title' }, 'Deliveries'));
  const range = h(
    'select',
    { id: 'stats-range' },
    ...[1, 3, 6, 24].map((hours) => h('option', { value: String(hours), selected: hours === 3 }, `Last ${hours} h`)),
  );
  const body = h('div', {});
  const load = async () => {
    const stats = await api<Stats>('GET', `${streamPath(stream.id)}/stats`, {
      query: lastMinutes(Number(range.value) * 60),
    });
    // The window's last minute is counted whole: the chart ends where that minute does.
    const end = new Date(Date.parse(stats.window.date_to) + 60_000).toISOString();
    body.replaceChildren(
      deliveryChart(minutesOf(stats), stats.window.date_from, end),
      h(
        'dl',
        { class: 'facts' },
        h('dt', {}, 'Health'),
        h('dd', {}, health(stats, stream)),
        h('dt', {}, 'Backlog'),
        h(
          'dd',
          { id: 'backlog' },
          `${stats.backlog.pending} waiting`,
          stats.backlog.oldest_due_at ? `, oldest due ${when(stats.backlog.oldest_due_at)}` : '',
        ),
        h('dt', {}, 'Paused until'),
        h('dd', {}, when(stats.health.circuit_open_until)),
      ),
    );
  };
  range.addEventListener('change', () => void load().catch((e: Error) => say(e.message, true)));
  await load();
  // The chart, backlog and health stay current while the page is shown; the timer ends with the view
  // (its section leaves the document) or the session.
  const timer = setInterval(() => {
    if (!section.isConnected || !can('read:event_streams')) return clearInterval(timer);
    if (document.visibilityState === 'visible') void load().catch(() => undefined);
  }, 30_000);
  section.append(h('div', { class: 'row' }, h('div', {}, h('label', { for: 'stats-range' }, 'Window'), range)), body);
  return section;
}

function deliveriesSection(stream: Stream): HTMLElement {
  const section = h(
    'section',
    { 'aria-labelledby': 'failed-title' },
    h('h2', { id: 'failed-title' }, 'Failed deliveries'),
  );
  if (!can('read:event_streams', 'read:event_deliveries')) {
    section.append(hidden('The failed-delivery log', ['read:event_deliveries', 'read:event_streams']));
    return section;
  }
  const types = stream.subscriptions.map((s) => s.event_type);
  const type = h(
    'select',
    { id: 'filter-type' },
    h('option', { value: '' }, 'All event types'),
    ...types.map((t) => h('option', { value: t }, t)),
  );
  const from = h('input', { id: 'filter-from', type: 'datetime-local', step: '1' });
  const to = h('input', { id: 'filter-to', type: 'datetime-local', step: '1' });
  const apply = h('button', { type: 'submit' }, 'Apply filters');
  const redeliverAll = h('button', { type: 'button', id: 'redeliver-window' }, 'Redeliver all matching…');
  const filters = h(
    'form',
    { class: 'row', 'aria-label': 'Filters' },
    h('div', {}, h('label', { for: 'filter-type' }, 'Event type'), type),
    h('div', {}, h('label', { for: 'filter-from' }, 'From'), from),
    h('div', {}, h('label', { for: 'filter-to' }, 'To'), to),
    apply,
    can('update:event_deliveries') && redeliverAll,
  );
  const tbody = h('tbody', {});
  const more = h('button', { type: 'button', hidden: true }, 'Load more');
  const empty = h('p', { class: 'muted', hidden: true }, 'No failed deliveries match.');
  let cursor: string | undefined;

  const query = () => ({
    statuses: 'failed',
    event_types: type.value || undefined,
    date_from: isoOf(from.value),
    date_to: isoOf(to.value),
  });
  const load = async (reset: boolean) => {
    if (reset) {
      cursor = undefined;
      tbody.replaceChildren();
    }
    const page = await api<{ deliveries: Delivery[]; next?: string }>('GET', `${streamPath(stream.id)}/deliveries`, {
      query: { ...query(), take: 25, from: cursor },
    });
    for (const delivery of page.deliveries) tbody.append(...deliveryRows(stream, delivery));
    cursor = page.next;
    more.hidden = cursor === undefined;
    empty.hidden = tbody.childElementCount > 0;
  };
  filters.addEventListener('submit', (event) => {
    event.preventDefault();
    void busy(apply, () => load(true));
  });
  more.addEventListener('click', () => void busy(more, () => load(false)));
  redeliverAll.addEventListener('click', () =>
    busy(redeliverAll, async () => {
      const q = query();
      const { count } = await api<{ count: number }>('GET', `${streamPath(stream.id)}/deliveries/count`, { query: q });
      if (count === 0) return say('No failed deliveries match the filters: nothing to redeliver.');
      const ok = await confirmAction(
        `Queue ${count} failed deliver${count === 1 ? 'y' : 'ies'} matching the filters for delivery again?`,
        `Redeliver ${count}`,
      );
      if (!ok) return;
      await api('POST', `${streamPath(stream.id)}/redeliver`, {
        body: {
          statuses: ['failed'],
          ...(q.event_types ? { event_types: [q.event_types] } : {}),
          ...(q.date_from ? { date_from: q.date_from } : {}),
          ...(q.date_to ? { date_to: q.date_to } : {}),
        },
      });
      say(`${count} deliver${count === 1 ? 'y' : 'ies'} queued again.`);
      await load(true);
    }),
  );
  void load(true).catch((e: Error) => say(e.message, true));
  section.append(
    filters,
    h(
      'table',
      {},
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', { scope: 'col' }, 'Event'),
          h('th', { scope: 'col' }, 'Type'),
          h('th', { scope: 'col' }, 'Status'),
          h('th', { scope: 'col' }, 'Last attempt'),
          h('th', { scope: 'col' }, 'Actions'),
        ),
      ),
      tbody,
    ),
    empty,
    more,
  );
  return section;
}

function attemptList(attempts: Attempt[]): HTMLElement {
  return h(
    'ol',
    { class: 'attempts' },
    ...attempts.map((a) =>
      h(
        'li',
        {},
        `${when(a.timestamp)} — ${a.status}`,
        a.duration === undefined ? '' : ` in ${a.duration} ms`,
        a.error_message ? `: ${a.error_message}` : '',
      ),
    ),
  );
}

function deliveryRows(stream: Stream, delivery: Delivery): HTMLElement[] {
  const last = delivery.attempts[delivery.attempts.length - 1];
  const status = h('td', {}, pill(delivery.status, delivery.status === 'failed' ? 'bad' : 'plain'));
  const detailsId = `attempts-${delivery.id}`;
  const details = h('tr', { id: detailsId, hidden: true }, h('td', { colspan: '5' }, attemptList(delivery.attempts)));
  const toggle = h(
    'button',
    { type: 'button', 'aria-expanded': 'false', 'aria-controls': detailsId },
    `Attempts (${delivery.attempts.length})`,
  );
  toggle.addEventListener('click', () => {
    details.hidden = !details.hidden;
    toggle.setAttribute('aria-expanded', String(!details.hidden));
  });
  const redeliver = h('button', { type: 'button', 'aria-label': `Redeliver ${delivery.id}` }, 'Redeliver');
  redeliver.addEventListener('click', () =>
    busy(redeliver, async () => {
      if (!(await confirmAction(`Deliver event ${delivery.id} again?`, 'Redeliver'))) return;
      await api('POST', `${streamPath(stream.id)}/redeliver/${encodeURIComponent(delivery.id)}`);
      say(`Event ${delivery.id} queued again.`);
      redeliver.hidden = true;
      status.replaceChildren(pill('pending', 'warn'));
      await follow(stream, delivery.id, status, details);
    }),
  );
  const row = h(
    'tr',
    { 'data-event': delivery.id },
    h('td', { class: 'mono' }, delivery.id),
    h('td', {}, delivery.event_type),
    status,
    h('td', {}, last ? `${when(last.timestamp)}${last.error_message ? `: ${last.error_message}` : ''}` : '—'),
    h('td', {}, toggle, ' ', can('update:event_deliveries') && redeliver),
  );
  return [row, details];
}

/** After a redelivery: the delivery's status until it is no longer pending (about a minute at most). */
async function follow(stream: Stream, eventId: string, status: HTMLElement, details: HTMLElement): Promise<void> {
  if (!can('read:event_deliveries')) return;
  for (let i = 0; i < 60; i++) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const delivery = await api<Delivery>('GET', `${streamPath(stream.id)}/deliveries/${encodeURIComponent(eventId)}`);
    if (delivery.status === 'pending') continue;
    status.replaceChildren(pill(delivery.status, delivery.status === 'delivered' ? 'good' : 'bad'));
    details.firstElementChild?.replaceChildren(attemptList(delivery.attempts));
    say(`Event ${eventId}: ${delivery.status}.`, delivery.status !== 'delivered');
    return;
  }
}

/** How often the live panel asks for new attempts, and how many rows it keeps. */
const LIVE_POLL_MS = 2000;
const LIVE_ROWS = 100;

const attemptTone = (status: string) => (status === 'delivered' ? 'good' : status === 'failed' ? 'bad' : 'warn');

/**
 * Attempts as the workers record them: the latest first, then every ~2 s only those recorded since
 * (GET …/attempts?after=<cursor>), new ones on top. It polls only while the view is shown and the tab
 * visible, and not while paused; leaving the view ends it.
 */
function liveSection(stream: Stream): HTMLElement {
  const section = h('section', { 'aria-labelledby': 'live-title' }, h('h2', { id: 'live-title' }, 'Live attempts'));
  const pause = h('button', { type: 'button', id: 'live-pause', 'aria-pressed': 'false' }, 'Pause');
  const state = h('span', { class: 'muted', id: 'live-state' }, 'Following: new attempts appear on top.');
  const tbody = h('tbody', {});
  const empty = h('p', { class: 'muted', id: 'live-empty' }, 'No attempts yet.');
  let cursor: string | undefined;
  let paused = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let polling = false;

  const row = (a: LiveAttempt) =>
    h(
      'tr',
      { 'data-attempt': `${a.event_id} ${a.seq}` },
      h('td', {}, when(a.timestamp)),
      h('td', { class: 'live-status' }, pill(a.status, attemptTone(a.status))),
      h('td', { class: 'mono' }, a.event_id),
      h('td', {}, a.event_type),
      h('td', {}, a.duration === undefined ? '—' : `${Math.round(a.duration)} ms`),
      h('td', {}, a.error_message ?? ''),
    );
  const poll = async () => {
    const page = await api<{ attempts: LiveAttempt[]; next?: string }>('GET', `${streamPath(stream.id)}/attempts`, {
      query: { take: cursor === undefined ? 25 : 100, after: cursor },
    });
    // Without a cursor: newest first, shown as they come. With one: oldest first, each put on top.
    if (cursor === undefined) tbody.append(...page.attempts.map(row));
    else for (const attempt of page.attempts) tbody.prepend(row(attempt));
    while (tbody.childElementCount > LIVE_ROWS) tbody.lastElementChild?.remove();
    cursor = page.next ?? cursor;
    empty.hidden = tbody.childElementCount > 0;
  };
  const following = 'Following: new attempts appear on top.';
  // Once shown, the view leaving the document ends the polling for good.
  let shown = false;
  const stop = () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
  };
  const schedule = () => {
    if (timer !== undefined || polling || paused || document.visibilityState !== 'visible') return;
    timer = setTimeout(() => {
      timer = undefined;
      if (!section.isConnected) {
        if (shown) document.removeEventListener('visibilitychange', onVisibility);
        else schedule();
        return;
      }
      shown = true;
      if (paused || document.visibilityState !== 'visible') return;
      polling = true;
      poll()
        .then(() => {
          if (state.classList.contains('error')) state.textContent = following;
          state.classList.remove('error');
        })
        .catch((e: Error) => {
          state.textContent = `Could not update: ${e.message}`;
          state.classList.add('error');
        })
        .finally(() => {
          polling = false;
          schedule();
        });
    }, LIVE_POLL_MS);
  };
  // A hidden tab asks nothing until it is shown again.
  const onVisibility = () => {
    if (shown && !section.isConnected) {
      stop();
      return document.removeEventListener('visibilitychange', onVisibility);
    }
    if (document.visibilityState === 'visible') schedule();
    else stop();
  };
  document.addEventListener('visibilitychange', onVisibility);
  pause.addEventListener('click', () => {
    paused = !paused;
    pause.setAttribute('aria-pressed', String(paused));
    state.classList.remove('error');
    state.textContent = paused ? 'Paused: press Pause again to resume.' : following;
    if (paused) stop();
    else schedule();
  });
  section.append(
    h('div', { class: 'row' }, pause, state),
    h(
      'table',
      { id: 'live-attempts' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', { scope: 'col' }, 'Time'),
          h('th', { scope: 'col' }, 'Status'),
          h('th', { scope: 'col' }, 'Event'),
          h('th', { scope: 'col' }, 'Type'),
          h('th', { scope: 'col' }, 'Duration'),
          h('th', { scope: 'col' }, 'Error'),
        ),
      ),
      tbody,
    ),
    empty,
  );
  polling = true;
  void poll()
    .catch((e: Error) => say(e.message, true))
    .finally(() => {
      polling = false;
      schedule();
    });
  return section;
}
