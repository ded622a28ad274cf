import { emailTemplateErrors, type ApiError } from '../../http/errors.ts';
import { RenderFailure, type PartSource, type TemplatePart, type TemplateRenderer } from './renderer.ts';

/** What a verify_email template is rendered with. */
export interface TemplateVariables {
  user: Record<string, unknown>;
  url: string;
  tenant: string;
  custom_domain: { domain: string; domain_metadata: Record<string, string> };
}

/** Liquid members of a template, by part. */
export type TemplateSources = Partial<Record<TemplatePart, string>>;

/** A context like a real one, to try a template out when it is saved. */
const SAMPLE: TemplateVariables = {
  user: {
    user_id: 'svc|000000000000000000000000',
    email: 'jane@example.com',
    email_verified: false,
    name: 'jane@example.com',
    nickname: 'jane',
    user_metadata: {},
    app_metadata: {},
  },
  url: 'https://login.example.com/u/email-verification?ticket=sample',
  tenant: 'sample',
  custom_domain: { domain: 'login.example.com', domain_metadata: {} },
};

/** The order parts are rendered and checked in: the first that fails is the one reported. */
const PARTS: readonly TemplatePart[] = ['body', 'subject', 'from'];

const partsOf = (sources: TemplateSources): PartSource[] =>
  PARTS.flatMap((part) => (sources[part] === undefined ? [] : [{ part, source: sources[part] }]));

/** A RenderFailure as the client sees it; a render stopped over the time or memory limit is also logged for the operator. */
function refusal(error: unknown, toApiError: (failure: RenderFailure) => ApiError): never {
  if (!(error instanceof RenderFailure)) throw error;
  const refused = toApiError(error);
  refused.logAtWarn = error.kind === 'stopped';
  throw refused;
}

/**
 * Each part given, rendered with `variables`; refuses templates that do not parse or fail to render
 * (over the time or memory bounds, say) with a 400 naming the member and Liquid's reason; `from` must
 * render to one email address.
 */
export async function renderOrRefuse<S extends TemplateSources>(
  renderer: TemplateRenderer,
  sources: S,
  variables: TemplateVariables,
  /** Whose render it is, for the renderer's turns: the tenant the variables are of, unless told. */
  key: string = variables.tenant,
): Promise<{ [K in keyof S]: string }> {
  const parts = partsOf(sources);
  try {
    const outputs = await renderer.render(parts, variables, key);
    return Object.fromEntries(parts.map(({ part }, i) => [part, outputs[i]])) as { [K in keyof S]: string };
  } catch (error) {
    refusal(error, (failure) =>
      failure.kind === 'not_an_address'
        ? emailTemplateErrors.invalidFrom(sources.from)
        : emailTemplateErrors.invalidLiquid(failure.part, failure.reason),
    );
  }
}

/** Refuses templates that do not render with a sample context (see renderOrRefuse), before they are saved. */
export async function checkTemplates(
  renderer: TemplateRenderer,
  sources: TemplateSources,
  tenantId: string,
): Promise<void> {
  await renderOrRefuse(renderer, sources, SAMPLE, tenantId);
}

/** What rendering a saved template gave: each part, or the reason it was stopped over the time or memory limit. */
export type RenderResult<S extends TemplateSources> =
  { kind: 'rendered'; parts: { [K in keyof S]: string } } | { kind: 'stopped'; reason: string };

/**
 * Each part given, rendered: the body as HTML, subject and from as one line of header text. A saved
 * template passed the checks above, so what fails now depends on the data it is rendered with: a render
 * stopped over the time or memory limit is a result, for the caller to record; any other failure is a
 * 400 (template_render_error).
 */
export async function renderTemplates<S extends TemplateSources>(
  renderer: TemplateRenderer,
  sources: S,
  variables: TemplateVariables,
): Promise<RenderResult<S>> {
  const parts = partsOf(sources);
  try {
    const outputs = await renderer.render(parts, variables, variables.tenant);
    return {
      kind: 'rendered',
      parts: Object.fromEntries(parts.map(({ part }, i) => [part, outputs[i]])) as { [K in keyof S]: string },
    };
  } catch (error) {
    if (error instanceof RenderFailure && error.kind === 'stopped') return { kind: 'stopped', reason: error.reason };
    refusal(error, (failure) => emailTemplateErrors.notRendered(failure.reason));
  }
}
