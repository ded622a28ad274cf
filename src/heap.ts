import v8 from 'node:v8';
import vm from 'node:vm';

/**
 * One full garbage collection, once start-up is over. Start-up (every route's schemas compiled, the
 * OpenAPI document, migrations) leaves some 40 MB of garbage in the old generation, which V8 collects
 * only once that generation grows past its first limit, under load; and V8 sets the next limit from
 * what it finds live at a full collection. Collected before the traffic starts, the heap grows from its
 * live size (about 30 MB): the first minutes under load peak some 60 MB lower (docs/benchmarks.md).
 * For `tenantry serve` alone: an embedded server leaves its host process's heap to its host.
 */
export function collectStartUpGarbage(): void {
  // gc() is exposed only by a flag: set at run time, it is read from a new context.
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  gc();
}
