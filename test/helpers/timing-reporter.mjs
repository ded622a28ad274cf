// A second test reporter (next to spec): after the run, the files that took longest, so a slow test
// shows up where someone will see it. A file's time is the sum of its top-level tests' durations
// (its suites run one after another), which leaves out the few hundred ms of loading the file.
export default async function* timingReporter(source) {
  const files = new Map();
  for await (const event of source) {
    if ((event.type !== 'test:pass' && event.type !== 'test:fail') || event.data.nesting !== 0) continue;
    const file = event.data.file ?? '(unknown)';
    files.set(file, (files.get(file) ?? 0) + (event.data.details?.duration_ms ?? 0));
  }
  // Source maps name the checkout's files; without them (TEST_TSX=1) they are under the working directory.
  const root = (process.env.TEST_PROJECT_ROOT ?? process.cwd()) + '/';
  const slowest = [...files].sort((a, b) => b[1] - a[1]);
  const total = slowest.reduce((sum, [, ms]) => sum + ms, 0);
  yield `\nslowest test files (sum of top-level tests; ${files.size} files, ${(total / 1000).toFixed(1)} s in all):\n`;
  for (const [file, ms] of slowest.slice(0, Number(process.env.TEST_SLOWEST ?? 10))) {
    yield `${(ms / 1000).toFixed(1).padStart(7)} s  ${file.replace(root, '')}\n`;
  }
}
