// Types of compile.mjs, for the TypeScript that imports it (the start-up benchmark).
export function compile(options: {
  root: string;
  dirs: string[];
  outDir: string;
  sourcemap?: 'inline' | 'linked' | false;
}): Promise<number>;
export function buildDist(project: string): Promise<number>;
