import { loadConfig } from '../config.ts';
import { serve } from '../serve.ts';

const usage = `Usage: tenantry <command>

Commands:
  serve        Serve the API (the default)
`;

/** The `tenantry` command line: one entry, one subcommand per task. */
export async function main(argv: string[]): Promise<void> {
  const [command = 'serve'] = argv;
  switch (command) {
    case 'serve':
      return serve(loadConfig());
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(usage);
      return;
    default:
      process.stderr.write(`Unknown command: ${command}\n\n${usage}`);
      process.exitCode = 2;
  }
}
