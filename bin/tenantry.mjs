#!/usr/bin/env node
// The `tenantry` command: TypeScript sources run through tsx, so no build step is needed.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
await main(process.argv.slice(2));
