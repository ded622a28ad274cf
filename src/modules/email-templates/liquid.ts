import { Liquid } from 'liquidjs';
import addressparser from 'nodemailer/lib/addressparser';
import { ApiError, badRequest } from '../../http/errors.ts';

/**
 * Liquid as the templates use it. Tags that read files (`include`, `render`, `layout`) are removed, so
 * a template can never pull a file of the server into an email; unknown filters are parse errors; only
 * own properties of the variables are reachable; parsing and rendering are bounded in time and memory,
 * because templates run on the request path.
 */
function engine(outputEscape: 'escape' | undefined): Liquid {
  const liquid = new Liquid({
    strictFilters: true,
    ownPropertyOnly: true,
    templates: {},
    ...(outputEscape ? { outputEscape } : {}),
    parseLimit: 200_000,
    renderLimit: 1_000,
    memoryLimit: 10_000_000,
  });
  for (const tag of ['include', 'render', 'layout']) delete liquid.tags[tag];
  return liquid;
}

/** The body is HTML: `{{ … }}` output is HTML-escaped unless a template says `| raw`. */
const html = engine('escape');
/** Subject and From are header text: escaping would put `&amp;` in them. */
const text = engine(undefined);

export type TemplatePart = 'body' | 'subject' | 'from';
const engineFor = (part: TemplatePart) => (part === 'body' ? html : text);

/** What a verify_email template is rendered with. */
export interface TemplateVariables {
  user: Record<string, unknown>;
  url: string;
  tenant: string;
  custom_domain: { domain: string; domain_metadata: Record<string, string> };
}

/** A context like a real one, to try a template out when it is saved. */
const SAMPLE: TemplateVariables = {
  user: { user_id: 'svc|000000000000000000000000', email: 'jane@example.com', email_verified: false, name: 'jane@example.com', nickname: 'jane', user_metadata: {}, app_metadata: {} },
  url: 'https://login.example.com/u/email-verification?ticket=sample',
  tenant: 'sample',
  custom_domain: { domain: 'login.example.com', domain_metadata: {} },
};

const firstLine = (error: unknown) => String((error as Error)?.message ?? error).split('\n')[0];

/**
 * Refuses a template that does not parse, or that fails when rendered with a sample context (over the
 * time or memory bounds, say), with a 400 naming the member and Liquid's reason.
 */
export async function checkTemplate(part: TemplatePart, source: string): Promise<void> {
  let rendered: string;
  try {
    const liquid = engineFor(part);
    rendered = await liquid.render(liquid.parse(source), SAMPLE);
  } catch (error) {
    throw badRequest.body(`Invalid Liquid template in ${part}: ${firstLine(error)}`);
  }
  if (part === 'from' && !isAddress(rendered)) {
    throw badRequest.body(`Invalid from: "${source}" is not an email address (e.g. "Acme <no-reply@acme.example>").`);
  }
}

function isAddress(value: string): boolean {
  const parsed = addressparser(value, { flatten: true });
  return parsed.length === 1 && /^[^@\s]+@[^@\s]+$/.test(parsed[0]!.address ?? '');
}

export async function renderTemplate(part: TemplatePart, source: string, variables: TemplateVariables): Promise<string> {
  try {
    const liquid = engineFor(part);
    const rendered = await liquid.render(liquid.parse(source), variables);
    if (part === 'from' && !isAddress(rendered)) throw new Error(`from renders to "${rendered}", which is not an email address`);
    return part === 'body' ? rendered : rendered.replace(/[\r\n]+/g, ' ').trim();
  } catch (error) {
    // A saved template passed the checks above; what fails now depends on this user's data.
    throw new ApiError(400, `The verify_email template could not be rendered: ${firstLine(error)}`, 'template_render_error');
  }
}
