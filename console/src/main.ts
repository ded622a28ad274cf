import { currentSession, signIn, signOut, whenSessionEnds } from './api.ts';
import { settingsView, usersView } from './directory.ts';
import { domainsView } from './domains.ts';
import { emailsView } from './emails.ts';
import { append, byId, h, say } from './dom.ts';
import { streamView, streamsView } from './streams.ts';

const view = byId('view');

function showSignIn(message?: string): void {
  byId('nav').hidden = true;
  byId('sign-out').hidden = true;
  byId('who').textContent = '';
  const id = h('input', { id: 'client-id', name: 'client_id', autocomplete: 'username', required: true });
  const secret = h('input', {
    id: 'client-secret',
    name: 'client_secret',
    type: 'password',
    autocomplete: 'current-password',
    required: true,
  });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  const form = h(
    'form',
    { class: 'signin' },
    h('label', { for: 'client-id' }, 'Client ID'),
    id,
    h('label', { for: 'client-secret' }, 'Client secret'),
    secret,
    submit,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    submit.disabled = true;
    signIn(id.value.trim(), secret.value)
      .then(() => {
        secret.value = '';
        say('');
        if (!location.hash || location.hash === '#/') location.hash = '#/streams';
        else void route();
      })
      .catch((error: Error) => say(`Sign-in refused: ${error.message}`, true))
      .finally(() => (submit.disabled = false));
  });
  view.replaceChildren(
    h('h1', {}, 'Sign in'),
    h(
      'p',
      { class: 'muted' },
      "With a machine-to-machine client's credentials. The token stays in this tab's memory only: reloading or closing the tab signs out.",
    ),
    form,
  );
  if (message) say(message, true);
  id.focus();
}

let shown = '';

async function route(): Promise<void> {
  const session = currentSession();
  if (!session) return showSignIn();
  // A message outlives a refresh of the view it was about (after an action), not a move to another view.
  if (location.hash !== shown) say('');
  shown = location.hash;
  byId('nav').hidden = false;
  byId('sign-out').hidden = false;
  byId('who').textContent = `Signed in as ${session.clientId}`;
  const [, area, id] = location.hash.split('/');
  for (const link of byId('nav').querySelectorAll('a'))
    if (link.getAttribute('href') === `#/${area}`) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  view.replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
  try {
    const content =
      area === 'domains'
        ? await domainsView()
        : area === 'emails'
          ? await emailsView()
          : area === 'users'
            ? await usersView()
            : area === 'settings'
              ? await settingsView()
              : area === 'streams' && id
                ? await streamView(decodeURIComponent(id))
                : await streamsView();
    view.replaceChildren();
    append(view, content);
  } catch (error) {
    // A 401 has ended the session and shown the sign-in form already: leave it there.
    if (!currentSession()) return;
    view.replaceChildren(h('h1', {}, 'Something went wrong'), h('p', {}, (error as Error).message));
  }
  // Focus moves to the new view, so keyboard and screen-reader users start there.
  view.focus();
}

whenSessionEnds(() => showSignIn('The session ended (the token expired or was revoked). Sign in again.'));
byId('sign-out').addEventListener('click', () => {
  signOut();
  showSignIn();
  say('Signed out.');
});
window.addEventListener('hashchange', () => void route());
void route();
