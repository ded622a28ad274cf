import { Liquid } from 'liquidjs';
import addressparser from 'nodemailer/lib/addressparser';
import { parentPort, workerData } from 'node:worker_threads';
import type { FromWorker, RenderJob, TemplatePart, WorkerSettings } from './renderer.ts';

/**
 * The thread that renders email templates (see renderer.ts): Liquid as the templates use it. Tags that
 * read files (`include`, `render`, `layout`) are removed, so a template can never pull a file of the
 * server into an email; unknown filters are parse errors; only own properties of the variables are
 * reachable. liquidjs's own limits stay: they end most runaway templates with Liquid's reason, and the
 * thread's wall-clock limit terminates the rest (liquidjs checks its time only between nodes).
 */
function engine(outputEscape: 'escape' | undefined): Liquid {
  const liquid = new Liquid({
    strictFilters: true,
    ownPropertyOnly: true,
    templates: {},
    ...(outputEscape ? { outputEscape } : {}),
    parseLimit: 200_000,
    renderLimit: (workerData as WorkerSettings).timeoutMs,
    memoryLimit: 10_000_000,
  });
  for (const tag of ['include', 'render', 'layout']) delete liquid.tags[tag];
  return liquid;
}

/** The body is HTML: `{{ … }}` output is HTML-escaped unless a template says `| raw`. */
const html = engine('escape');
/** Subject and From are header text: escaping would put `&amp;` in them. */
const text = engine(undefined);

function isAddress(value: string): boolean {
  const parsed = addressparser(value, { flatten: true });
  return parsed.length === 1 && /^[^@\s]+@[^@\s]+$/.test(parsed[0]!.address ?? '');
}

/** Parsing a long rendered `from` costs time too, so it is done here, under the limit. */
class NotAnAddress extends Error {}

/**
 * The most each part may render to, in UTF-16 code units. liquidjs's memory limit does not count output:
 * a loop repeating a 99 KB piece of the body rendered 297 MB within the time limit, built as a chain of
 * references to the same text (so the thread's heap held it), which the main thread then copied, sealed,
 * stored and wrote to the mailbox, holding up every request for seconds. Checked here, before the output
 * leaves the thread (a chain's length costs nothing to read). A body is HTML for one email (mail
 * clients clip past about 100 KB); a subject and a from are one header line each.
 */
const MAX_RENDERED: Readonly<Record<TemplatePart, number>> = { body: 1_000_000, subject: 2_000, from: 2_000 };

async function renderPart(part: TemplatePart, source: string, variables: RenderJob['variables']): Promise<string> {
  const liquid = part === 'body' ? html : text;
  const rendered = await liquid.render(liquid.parse(source), variables);
  if (rendered.length > MAX_RENDERED[part])
    throw new Error(`renders to ${rendered.length} characters, more than the limit of ${MAX_RENDERED[part]}`);
  if (part === 'from' && !isAddress(rendered))
    throw new NotAnAddress(`from renders to "${rendered}", which is not an email address`);
  return part === 'body' ? rendered : rendered.replace(/[\r\n]+/g, ' ').trim();
}

const port = parentPort!;
const send = (message: FromWorker) => port.postMessage(message);

// Each part's output goes back as soon as it is ready: if the thread is stopped, the main thread
// knows which part was running.
port.on('message', async ({ parts, variables }: RenderJob) => {
  for (const { part, source } of parts) {
    try {
      send({ kind: 'rendered', output: await renderPart(part, source, variables) });
    } catch (error) {
      const reason = String((error as Error)?.message ?? error).split('\n')[0]!;
      send({ kind: 'failed', reason, notAnAddress: error instanceof NotAnAddress });
      return;
    }
  }
});
send({ kind: 'ready' });
