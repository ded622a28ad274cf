// The command line's entry: `bin/tenantry.mjs` runs its compiled copy (dist/cli/run.js), `npm run dev`
// runs this file on the sources through tsx.
import { main } from './main.ts';

await main(process.argv.slice(2));
