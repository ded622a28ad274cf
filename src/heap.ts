import { createRequire } from 'node:module';
import v8 from 'node:v8';
import vm from 'node:vm';

let gcFunction: (() => void) | undefined;

/**
 * V8's gc(), a full collection: exposed only by a flag; set at run time, the flag is read from a new
 * context. Called without options: on Node 20 the options form (`{ type: 'major' }`) collected nothing.
 */
function gc(): () => void {
  if (!gcFunction) {
    v8.setFlagsFromString('--expose-gc');
    gcFunction = vm.runInNewContext('gc') as () => void;
  }
  return gcFunction;
}

/**
 * One full garbage collection, once start-up is over. Start-up (every route's schemas compiled, the
 * OpenAPI document, migrations) leaves some 40 MB of garbage in the old generation, which V8 collects
 * only once that generation grows past its first limit, under load; and V8 sets the next limit from
 * what it finds live at a full collection. Collected before the traffic starts, the heap grows from its
 * live size (about 30 MB): the first minutes under load peak some 60 MB lower (docs/benchmarks.md).
 * For `tenantry serve` alone: an embedded server leaves its host process's heap to its host.
 */
export function collectStartUpGarbage(): void {
  gc()();
  trimMalloc();
}

/** The optional native addon native/malloc-trim (built by `npm ci` where a C compiler is present). */
interface MallocTrimAddon {
  available: boolean;
  trim(): boolean;
}

let mallocTrimAddon: MallocTrimAddon | Error | undefined;

/**
 * glibc's malloc_trim(0), or why it cannot be called: the addon was not built (no compiler at install)
 * or the C library is not glibc. Loaded once, on first use.
 */
export function mallocTrim(): MallocTrimAddon | Error {
  if (mallocTrimAddon === undefined) {
    try {
      const addon = createRequire(import.meta.url)('tenantry-malloc-trim') as MallocTrimAddon;
      mallocTrimAddon = addon.available ? addon : new Error('the C library is not glibc');
    } catch (error) {
      // Node's message goes on with the require stack: its first line says what is missing.
      mallocTrimAddon = new Error(String(error instanceof Error ? error.message : error).split('\n')[0]);
    }
  }
  return mallocTrimAddon;
}

/** malloc_trim(0) where it can be called: whether it gave pages back, else undefined. */
function trimMalloc(): boolean | undefined {
  const addon = mallocTrim();
  return addon instanceof Error ? undefined : addon.trim();
}

export interface Reclaimed {
  /** Whether malloc_trim gave pages back; undefined where it cannot be called (see mallocTrim). */
  mallocTrimmed: boolean | undefined;
}

/**
 * What an idle server gives back: V8's heap, whose emptied pages V8 then returns to the system from a
 * background thread; whatever else `also` frees (SQLite's page cache); then the C allocator's free
 * pages. glibc keeps what is freed between live blocks, and its top above a threshold it raises as
 * large blocks come and go: after a 2-minute load of users-by-email the main heap stayed at 19 MB
 * where 7 MB was in use until malloc_trim(0) gave the rest back (docs/benchmarks.md, Memory and soak).
 */
export function reclaimMemory(also: () => void = () => undefined): Reclaimed {
  gc()();
  also();
  return { mallocTrimmed: trimMalloc() };
}

export interface IdleReclaimOptions {
  /** Runs once each time the process turns idle after having worked. */
  reclaim: () => void;
  /** CPU time the process has used, in microseconds (user + system). */
  cpuMicros?: () => number;
  /** How often the CPU time is sampled. */
  intervalMs?: number;
  /** Samples in a row under `idleShare` of one core that make the process idle. */
  quietSamples?: number;
  /** The share of one core under which a sample counts as quiet. */
  idleShare?: number;
}

/**
 * Gives memory back once a server that worked falls idle. Under load V8 grows its heap (the young
 * generation up to its semi-space limit, the old one to the next limit) and keeps the pages when the
 * load ends: after a burst of users-by-email the heap stayed at 47–60 MB where 25 MB is live, and only
 * a full collection returns it (`npm run bench -- soak`, idle 90 s after the load). Idleness
 * is read from the process's own CPU time, sampled every 10 s: no per-request work, and background work
 * (deliveries, imports) counts as work. The reclaim runs once per busy stretch, so an idle server is
 * not collected again and again.
 */
export class IdleReclaim {
  private readonly cpuMicros: () => number;
  private readonly quietBelowMicros: number;
  private readonly quietSamples: number;
  private lastCpu: number;
  private quiet = 0;
  private workedSinceReclaim = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: IdleReclaimOptions) {
    this.cpuMicros =
      options.cpuMicros ??
      (() => {
        const { user, system } = process.cpuUsage();
        return user + system;
      });
    const intervalMs = options.intervalMs ?? 10_000;
    this.quietBelowMicros = intervalMs * 1000 * (options.idleShare ?? 0.02);
    this.quietSamples = options.quietSamples ?? 3;
    this.lastCpu = this.cpuMicros();
  }

  start(intervalMs = this.options.intervalMs ?? 10_000): this {
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.timer.unref();
    return this;
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** One sample; true when it ran the reclaim. */
  sample(): boolean {
    const cpu = this.cpuMicros();
    const used = cpu - this.lastCpu;
    this.lastCpu = cpu;
    if (used >= this.quietBelowMicros) {
      this.quiet = 0;
      this.workedSinceReclaim = true;
      return false;
    }
    this.quiet++;
    if (!this.workedSinceReclaim || this.quiet < this.quietSamples) return false;
    this.workedSinceReclaim = false;
    this.options.reclaim();
    // The reclaim's own CPU time is not work.
    this.lastCpu = this.cpuMicros();
    return true;
  }
}
