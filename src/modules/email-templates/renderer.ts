import type { Worker } from 'node:worker_threads';
import { tooManyRequests } from '../../http/errors.ts';
import { siblingModule, startThread } from '../../worker-thread.ts';

export type TemplatePart = 'body' | 'subject' | 'from';
export interface PartSource {
  part: TemplatePart;
  source: string;
}

/** What the main thread asks of a render thread: these parts, in order, with these variables. */
export interface RenderJob {
  parts: PartSource[];
  variables: object;
}

/** What a render thread is started with. */
export interface WorkerSettings {
  timeoutMs: number;
}

/** What a render thread answers: once that it is ready, then each part's output until one fails. */
export type FromWorker =
  { kind: 'ready' } | { kind: 'rendered'; output: string } | { kind: 'failed'; reason: string; notAnAddress: boolean };

/** A part that did not render: Liquid's reason, a `from` that is no address, or a thread stopped over its limit. */
export class RenderFailure extends Error {
  constructor(
    readonly part: TemplatePart,
    readonly reason: string,
    readonly kind: 'liquid' | 'not_an_address' | 'stopped',
  ) {
    super(reason);
  }
}

export interface RendererSettings {
  threads: number;
  /** Wall-clock limit of one render job (all its parts); over it the thread is terminated. */
  timeoutMs: number;
  /**
   * A thread left without a render this long is ended (each holds a V8 heap of its own, some 15–20 MB
   * of resident memory); the next render starts one again. A server that sends no email holds none.
   */
  idleMs: number;
}

/**
 * Waiting is bounded twice: at most this many renders wait per thread (more are refused at once), and a
 * render that waited longer than the render limit itself is refused when its turn comes. A burst of
 * ordinary renders (a millisecond each) queues and goes through; a flood of slow templates is refused
 * within about twice the limit instead of piling up behind one another.
 */
const QUEUED_PER_THREAD = 256;
/** A thread's own heap limit: liquidjs's memory limit counts most allocations; this stops the rest. */
const THREAD_HEAP_MB = 256;

interface Pending {
  job: RenderJob;
  /** Whose render it is (a tenant id): renders are taken from each in turn. */
  key: string;
  /** performance.now() when it was queued. */
  queuedAt: number;
  resolve(outputs: string[]): void;
  reject(error: Error): void;
}

interface Thread {
  worker: Worker;
  ready: boolean;
  running: { pending: Pending; outputs: string[]; timer: NodeJS.Timeout } | undefined;
  /** Ends the thread once it has been idle for `idleMs`; set while it waits for work. */
  idleTimer: NodeJS.Timeout | undefined;
}

const entry = siblingModule(import.meta.url, 'render-worker');

function startWorker(workerData: WorkerSettings): Worker {
  return startThread(entry, { workerData, resourceLimits: { maxOldGenerationSizeMb: THREAD_HEAP_MB } });
}

/**
 * Renders email templates off the event loop, on a small pool of threads started on first use and
 * ended after idleMs without a render (a thread started with the server, and kept, cost an idle server
 * some 20 MB of resident memory even once ended). liquidjs checks its time limit only between nodes, so one filter looping over a huge range
 * would otherwise hold the event loop (and every other request) for as long as it runs. A job that
 * exceeds the wall-clock limit has its thread terminated mid-render, and a new thread takes its place.
 */
const busy = () => tooManyRequests('Too many email templates are being rendered at once; try again shortly.');

export class TemplateRenderer {
  private readonly threads = new Set<Thread>();
  private readonly queue: Pending[] = [];
  /**
   * Renders running and waiting, and when each key last had one started, by key: the threads are every
   * tenant's, and one client flooding them with renders that run to the limit (previews need only
   * read:email_templates) made other tenants' new users answer 429 when the queue was first come, first
   * served. The next render is the oldest of the key with the fewest running, then served longest ago.
   */
  private readonly runningByKey = new Map<string, number>();
  private readonly queuedByKey = new Map<string, number>();
  private readonly startedByKey = new Map<string, number>();
  private starts = 0;
  private closed = false;
  /**
   * When the first thread became ready. A render's wait counts from then at the earliest: the threads'
   * start (loading the template engine, seconds on a loaded machine) is not a flood of renders to refuse.
   */
  private firstReadyAt = Number.POSITIVE_INFINITY;

  constructor(private readonly settings: RendererSettings) {}

  /** Threads started and not ended (ready or starting). */
  get threadCount(): number {
    return this.threads.size;
  }

  /** Each part's output, in order; rejects with a RenderFailure for the first part that fails, or a 429 when too many wait. */
  render(parts: PartSource[], variables: object, key = ''): Promise<string[]> {
    if (parts.length === 0) return Promise.resolve([]);
    if (this.closed) return Promise.reject(new Error('The template renderer is closed.'));
    // One key may fill what the whole queue held before; all of them together, twice that.
    const perKey = QUEUED_PER_THREAD * this.settings.threads;
    if ((this.queuedByKey.get(key) ?? 0) >= perKey || this.queue.length >= 2 * perKey) return Promise.reject(busy());
    return new Promise((resolve, reject) => {
      this.queue.push({ job: { parts, variables }, key, queuedAt: performance.now(), resolve, reject });
      count(this.queuedByKey, key, 1);
      this.dispatch();
    });
  }

  /** Terminates the threads; renders in flight or waiting fail. */
  async close(): Promise<void> {
    this.closed = true;
    const closing = new Error('The template renderer is closed.');
    for (const pending of this.queue.splice(0)) pending.reject(closing);
    this.queuedByKey.clear();
    this.runningByKey.clear();
    this.startedByKey.clear();
    const threads = [...this.threads];
    this.threads.clear();
    for (const thread of threads) {
      clearTimeout(thread.running?.timer);
      clearTimeout(thread.idleTimer);
      thread.running?.pending.reject(closing);
    }
    await Promise.all(threads.map((thread) => thread.worker.terminate()));
  }

  private dispatch(): void {
    for (const thread of this.threads) {
      if (!thread.ready || thread.running) continue;
      const next = this.next();
      if (!next) {
        this.idle(thread);
        continue;
      }
      this.run(thread, next);
    }
    while (this.queue.length > 0 && this.threads.size < this.settings.threads) this.spawn();
  }

  /**
   * Takes the next render off the queue (see runningByKey), refusing on the way those that waited longer
   * than the render limit. The oldest render of a key with none running is spared: it goes next or soon
   * after, having waited at most for a thread to come free, however long another key's renders held them.
   */
  private next(): Pending | undefined {
    const now = performance.now();
    const seen = new Set<string>();
    let best = -1;
    for (let i = 0; i < this.queue.length; i++) {
      const pending = this.queue[i]!;
      const spared = !seen.has(pending.key) && !this.runningByKey.has(pending.key);
      seen.add(pending.key);
      if (!spared && now - Math.max(pending.queuedAt, this.firstReadyAt) > this.settings.timeoutMs) {
        this.queue.splice(i--, 1);
        count(this.queuedByKey, pending.key, -1);
        pending.reject(busy());
      } else if (best < 0 || this.sooner(pending.key, this.queue[best]!.key)) best = i;
    }
    if (best < 0) return undefined;
    const [next] = this.queue.splice(best, 1);
    count(this.queuedByKey, next!.key, -1);
    return next;
  }

  /** Whether `a`'s render goes before `b`'s: fewer of its renders running, else its last start longer ago. */
  private sooner(a: string, b: string): boolean {
    const running = (this.runningByKey.get(a) ?? 0) - (this.runningByKey.get(b) ?? 0);
    if (running !== 0) return running < 0;
    return (this.startedByKey.get(a) ?? -1) < (this.startedByKey.get(b) ?? -1);
  }

  private spawn(): void {
    const thread: Thread = {
      worker: startWorker({ timeoutMs: this.settings.timeoutMs }),
      ready: false,
      running: undefined,
      idleTimer: undefined,
    };
    this.threads.add(thread);
    // An idle thread does not keep the process alive; a render in flight does, through its timer.
    thread.worker.unref();
    thread.worker.on('message', (message: FromWorker) => this.received(thread, message));
    thread.worker.on('error', (error) => this.crashed(thread, error));
    thread.worker.on('exit', () => this.threads.delete(thread));
  }

  private run(thread: Thread, pending: Pending): void {
    clearTimeout(thread.idleTimer);
    thread.idleTimer = undefined;
    const timer = setTimeout(
      () => this.stop(thread, `rendering took longer than the limit of ${this.settings.timeoutMs} ms`),
      this.settings.timeoutMs,
    );
    thread.running = { pending, outputs: [], timer };
    count(this.runningByKey, pending.key, 1);
    this.startedByKey.set(pending.key, ++this.starts);
    thread.worker.postMessage(pending.job);
  }

  private received(thread: Thread, message: FromWorker): void {
    if (message.kind === 'ready') {
      thread.ready = true;
      this.firstReadyAt = Math.min(this.firstReadyAt, performance.now());
      this.dispatch();
      return;
    }
    const running = thread.running;
    if (!running) return;
    const { pending, outputs } = running;
    if (message.kind === 'rendered') {
      outputs.push(message.output);
      if (outputs.length < pending.job.parts.length) return;
      pending.resolve(outputs);
    } else {
      pending.reject(
        new RenderFailure(
          pending.job.parts[outputs.length]!.part,
          message.reason,
          message.notAnAddress ? 'not_an_address' : 'liquid',
        ),
      );
    }
    clearTimeout(running.timer);
    thread.running = undefined;
    this.finished(pending.key);
    this.dispatch();
  }

  /** A render of `key` ended; a key with nothing running nor waiting is forgotten. */
  private finished(key: string): void {
    count(this.runningByKey, key, -1);
    if (!this.runningByKey.has(key) && !this.queuedByKey.has(key)) this.startedByKey.delete(key);
  }

  /** Arms the idle timer of a thread waiting for work (once: a timer already armed keeps its time). */
  private idle(thread: Thread): void {
    if (thread.idleTimer !== undefined) return;
    thread.idleTimer = setTimeout(() => {
      thread.idleTimer = undefined;
      if (thread.running || !this.threads.has(thread)) return;
      this.threads.delete(thread);
      void thread.worker.terminate();
    }, this.settings.idleMs);
    // An idle thread's timer does not keep the process alive.
    thread.idleTimer.unref();
  }

  /** Ends the job running on the thread, and the thread with it; a fresh thread takes its place at once. */
  private stop(thread: Thread, reason: string): void {
    const running = thread.running;
    this.threads.delete(thread);
    clearTimeout(thread.idleTimer);
    void thread.worker.terminate();
    thread.running = undefined;
    if (running) {
      clearTimeout(running.timer);
      this.finished(running.pending.key);
      running.pending.reject(
        new RenderFailure(running.pending.job.parts[running.outputs.length]!.part, reason, 'stopped'),
      );
    }
    if (!this.closed) this.spawn();
  }

  private crashed(thread: Thread, error: Error): void {
    if (thread.running) {
      const outOfMemory = (error as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY';
      this.stop(
        thread,
        outOfMemory
          ? `rendering used more than the memory limit of ${THREAD_HEAP_MB} MB`
          : `rendering failed: ${error.message}`,
      );
      return;
    }
    this.threads.delete(thread);
    // A thread that cannot even start would leave the waiting renders waiting for ever.
    if (!thread.ready)
      for (const pending of this.queue.splice(0)) {
        count(this.queuedByKey, pending.key, -1);
        pending.reject(error);
      }
  }
}

/** Adds `delta` to the key's count, forgetting keys that reach 0. */
function count(counts: Map<string, number>, key: string, delta: number): void {
  const value = (counts.get(key) ?? 0) + delta;
  if (value > 0) counts.set(key, value);
  else counts.delete(key);
}
