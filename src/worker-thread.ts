import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * The module `name` beside the module at `from` (its `import.meta.url`), with that module's own
 * extension: .ts when the sources run through tsx, .js once compiled (dist/, the tests' tree).
 */
export function siblingModule(from: string, name: string): URL {
  return new URL(`./${name}${from.slice(from.lastIndexOf('.'))}`, from);
}

/** A thread running the module `entry` (see siblingModule), compiled or TypeScript alike. */
export function startThread(entry: URL, options: WorkerOptions = {}): Worker {
  if (!entry.pathname.endsWith('.ts')) return new Worker(entry, options);
  // Node 20 applies no module hooks to a worker's entry (not even from its --import): the thread
  // registers tsx itself, then loads the TypeScript entry.
  const tsx = JSON.stringify(import.meta.resolve('tsx/esm/api'));
  return new Worker(`import(${tsx}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); })`, {
    ...options,
    eval: true,
  });
}
