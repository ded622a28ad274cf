// The console builds its DOM from nodes and text nodes only, never from HTML strings: every value the
// API returns (stream names, webhook error messages) is shown as text, so none of it can become markup.

export type Child = Node | string | number | null | undefined | false;
type Attributes = Record<string, string | boolean | undefined | ((event: Event) => void)>;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Attributes = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (typeof value === 'function') element.addEventListener(name.slice(2), value);
    else if (value === true) element.setAttribute(name, '');
    else if (typeof value === 'string') element.setAttribute(name, value);
  }
  append(element, children);
  return element;
}

export function append(parent: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
}

const SVG = 'http://www.w3.org/2000/svg';

export function svg(tag: string, attributes: Record<string, string | number>, ...children: Child[]): SVGElement {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  append(element, children);
  return element;
}

export function byId<T extends HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (!element) throw new Error(`#${id} is missing from the page`);
  return element as T;
}

/** Announces a message in the page's live region (read out by screen readers). */
export function say(message: string, error = false): void {
  const status = byId('status');
  status.textContent = message;
  status.classList.toggle('error', error);
}

/** Asks before anything that changes state; resolves true only on the dialog's confirm button. */
export function confirmAction(message: string, confirmLabel: string): Promise<boolean> {
  const dialog = byId<HTMLDialogElement>('confirm');
  byId('confirm-message').textContent = message;
  byId('confirm-ok').textContent = confirmLabel;
  dialog.returnValue = '';
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
  });
}

/** `2026-01-02T03:04:05.678Z` as the reader's local date and time. */
export function when(iso: string | undefined): string {
  if (!iso) return '—';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

/** A pill showing a status word, coloured by what it means. */
export function pill(text: string, tone: 'good' | 'bad' | 'warn' | 'plain' = 'plain'): HTMLElement {
  return h('span', { class: `pill ${tone}` }, text);
}

/** Runs a button's action with the button disabled meanwhile; failures are announced. */
export async function busy(button: HTMLButtonElement, action: () => Promise<void>): Promise<void> {
  button.disabled = true;
  try {
    await action();
  } catch (error) {
    say(error instanceof Error ? error.message : String(error), true);
  } finally {
    button.disabled = false;
  }
}
