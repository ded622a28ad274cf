// Form fields whose errors are the API's own: a refusal's message is shown beside the field it concerns,
// tied to it with aria-describedby (and aria-invalid), so a screen reader reads it with the field.
import { ApiFailure } from './api.ts';
import { h, say } from './dom.ts';

type Control = HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement;

export interface Field {
  /** The member of the request body (or of the provider's object) the field edits. */
  key: string;
  control: Control;
  /** Label, control, hint and error, to place in a form. */
  element: HTMLElement;
  setError(message: string | undefined): void;
}

export function field(id: string, key: string, label: string, control: Control, hint?: string): Field {
  control.id = id;
  const hintElement = hint ? h('p', { id: `${id}-hint`, class: 'hint' }, hint) : null;
  const error = h('p', { id: `${id}-error`, class: 'field-error', hidden: true });
  const describe = (withError: boolean) =>
    [hintElement ? `${id}-hint` : '', withError ? `${id}-error` : ''].filter(Boolean).join(' ');
  const describedBy = describe(false);
  if (describedBy) control.setAttribute('aria-describedby', describedBy);
  const checkbox = control instanceof HTMLInputElement && control.type === 'checkbox';
  const element = checkbox
    ? h('div', { class: 'field' }, h('label', { for: id, class: 'inline' }, control, ` ${label}`), hintElement, error)
    : h('div', { class: 'field' }, h('label', { for: id }, label), control, hintElement, error);
  return {
    key,
    control,
    element,
    setError(message) {
      error.textContent = message ?? '';
      error.hidden = message === undefined;
      const ids = describe(message !== undefined);
      if (ids) control.setAttribute('aria-describedby', ids);
      else control.removeAttribute('aria-describedby');
      if (message === undefined) control.removeAttribute('aria-invalid');
      else control.setAttribute('aria-invalid', 'true');
    },
  };
}

/**
 * The field a validation message is about: `… on property rules[0].match.country` names the rules
 * field, `… on property recaptcha_v2.site_key` the site key; `Missing required property: secret` the
 * secret; otherwise a field named in the message (`Invalid Liquid template in body: …`).
 */
export function fieldOf(message: string, fields: readonly Field[]): Field | undefined {
  const byKey = (key: string | undefined) => fields.find((f) => f.key === key);
  const path = / on property ([^\s(]+?)\.?(?: \(|:|$)/.exec(message)?.[1];
  if (path) {
    const segments = path.split(/[.[\]/]+/).filter(Boolean);
    for (const segment of [...segments].reverse()) if (byKey(segment)) return byKey(segment);
  }
  const missing = /Missing required property: ([\w-]+)/.exec(message)?.[1];
  if (byKey(missing)) return byKey(missing);
  for (const f of fields) if (new RegExp(`\\b(in|Invalid) ${f.key}\\b`).test(message)) return f;
  return undefined;
}

/**
 * Runs a form's request: clears its errors first; a refusal is shown beside the field it concerns
 * (the first one focused), or announced when it concerns none.
 */
export async function submitting(
  fields: readonly Field[],
  action: () => Promise<void>,
  conflictField?: Field,
): Promise<void> {
  for (const f of fields) f.setError(undefined);
  try {
    await action();
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const target =
      error instanceof FieldError
        ? error.field
        : error instanceof ApiFailure && error.status === 409 && conflictField
          ? conflictField
          : error instanceof ApiFailure && error.status === 400
            ? fieldOf(message, fields)
            : undefined;
    if (target) {
      target.setError(message);
      say('The change was refused: see the field marked.', true);
      target.control.focus();
    } else say(message, true);
  }
}

/** A problem found before any request, about one field (JSON that does not parse, say). */
export class FieldError extends Error {
  constructor(
    readonly field: Field,
    message: string,
  ) {
    super(message);
  }
}

/** A sandboxed frame for email HTML: no script, an opaque origin, nothing it links to is followed in place. */
export function emailFrame(html: string, title: string): HTMLIFrameElement {
  const frame = h('iframe', { sandbox: '', referrerpolicy: 'no-referrer', title, class: 'email-frame' });
  frame.srcdoc = html;
  return frame;
}
