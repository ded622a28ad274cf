import fs from 'node:fs';
import path from 'node:path';
import type { ErrorObject } from 'ajv';
import type YAMLModule from 'yaml';
import { lazyModule } from '../lazy-module.ts';
import { renderPath, validatorCompiler } from '../http/validation.ts';
import { LONE_SURROGATE_MESSAGE, loneSurrogatePath } from '../lone-surrogates.ts';
import { signingSecretProblem } from '../modules/event-streams/signing-secret-rotation.ts';
import { Seed } from './schema.ts';

/** Loaded by the first YAML seed read or written. */
const yaml = lazyModule<typeof YAMLModule>('yaml');

/** A seed that cannot be used; the message names the file and the member. */
export class SeedError extends Error {}

/**
 * What `tenantry seed export` writes in place of a secret it leaves out (webhook, CAPTCHA and signing
 * secrets, without --with-secrets): a seed still holding it is refused, naming the member to fill in.
 */
export const SECRET_PLACEHOLDER = 'REPLACE-ME: secrets are not exported';

/** The names looked for in the working directory when no seed is named. */
export const SEED_FILE_NAMES = ['tenantry.seed.yaml', 'tenantry.seed.yml', 'tenantry.seed.json'];

/** The seed file of `dir`, if it has one. */
export function findSeedFile(dir: string): string | undefined {
  return SEED_FILE_NAMES.map((name) => path.join(dir, name)).find((file) => fs.existsSync(file));
}

/** Reads a seed file (YAML, or JSON for `.json`), validated. */
export function readSeedFile(file: string): Seed {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (error) {
    throw new SeedError(`seed ${file}: ${(error as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = file.endsWith('.json') ? JSON.parse(text) : yaml().parse(text);
  } catch (error) {
    throw new SeedError(
      `seed ${file}: not valid ${file.endsWith('.json') ? 'JSON' : 'YAML'}: ${(error as Error).message}`,
    );
  }
  return validSeed(parsed, file);
}

/**
 * `seed` checked against the schema, and for what a schema cannot say; SeedError names the bad member.
 * A secret left as SECRET_PLACEHOLDER is refused unless `placeholders` (the export's own check).
 */
export function validSeed(seed: unknown, where = 'seed', options: { placeholders?: boolean } = {}): Seed {
  if (!options.placeholders) {
    const placeholder = placeholderPath(seed);
    if (placeholder !== undefined)
      throw new SeedError(
        `${where}: ${placeholder}: still the placeholder "${SECRET_PLACEHOLDER}" of an export without --with-secrets: ` +
          'put the real secret there (or export with --with-secrets)',
      );
  }
  const validate = validatorCompiler({ schema: Seed });
  if (!validate(seed)) throw new SeedError(`${where}: ${describe(validate.errors?.[0])}`);
  // As in every API body: a lone surrogate would be stored as U+FFFD (see lone-surrogates.ts).
  const surrogateAt = loneSurrogatePath(seed);
  if (surrogateAt !== undefined) throw new SeedError(`${where}: ${renderPath(surrogateAt)}: ${LONE_SURROGATE_MESSAGE}`);
  const valid = seed as Seed;
  const ids = new Set<string>();
  let hostless = 0;
  for (const [index, tenant] of valid.tenants.entries()) {
    if (ids.has(tenant.id)) throw new SeedError(`${where}: tenants[${index}].id: "${tenant.id}" is declared twice`);
    ids.add(tenant.id);
    if (tenant.domain === undefined && ++hostless > 1)
      throw new SeedError(`${where}: tenants[${index}].domain: only one tenant may be served on the server's own host`);
    for (const [i, stream] of (tenant.event_streams ?? []).entries()) {
      const secret = stream.signing_secret;
      const unchecked = secret === undefined || (options.placeholders && secret === SECRET_PLACEHOLDER);
      const problem = unchecked ? undefined : signingSecretProblem(secret);
      if (problem !== undefined)
        throw new SeedError(`${where}: tenants[${index}].event_streams[${i}].signing_secret: ${problem}`);
    }
  }
  return valid;
}

/** The member (`tenants[0].captcha.hcaptcha.secret`) of the first string that is SECRET_PLACEHOLDER, if any. */
function placeholderPath(value: unknown, at = ''): string | undefined {
  if (value === SECRET_PLACEHOLDER) return at || '(root)';
  if (typeof value !== 'object' || value === null) return undefined;
  for (const [key, child] of Object.entries(value)) {
    const found = placeholderPath(child, Array.isArray(value) ? `${at}[${key}]` : at ? `${at}.${key}` : key);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** `/tenants/0/users/2/email` → `tenants[0].users[2].email`, with Ajv's reason. */
function describe(error: ErrorObject | undefined): string {
  if (!error) return 'invalid';
  const member = error.instancePath
    .split('/')
    .slice(1)
    .map((part) => (/^\d+$/.test(part) ? `[${part}]` : `.${part}`))
    .join('')
    .replace(/^\./, '');
  const extra =
    error.keyword === 'additionalProperties'
      ? ` (${(error.params as { additionalProperty: string }).additionalProperty})`
      : '';
  return `${member || '(root)'}: ${error.message ?? error.keyword}${extra}`;
}
