import { randomBytes } from 'node:crypto';
import type { ServerProcess } from '../test/helpers/server-process.ts';

/** What a scenario's clients saw: the users acknowledged (201) and every answer, by status. */
export interface Ledger {
  created: Set<string>;
  /** Answers by status ('201', '503'…), and 'no answer' for a request whose connection failed or timed out. */
  answers: Map<string, number>;
  /** The first body of each non-201 status, to name what went wrong. */
  samples: Map<string, string>;
}

export function newLedger(): Ledger {
  return { created: new Set(), answers: new Map(), samples: new Map() };
}

/** Answers in the 5xx range. */
export function serverErrors(ledger: Ledger): number {
  return [...ledger.answers].filter(([status]) => status.startsWith('5')).reduce((sum, [, n]) => sum + n, 0);
}

/** A node to send a request to, or undefined when none is up. */
export type Target = () => { server: ServerProcess; token: string } | undefined;

/** Each request gives up after this long: no client waits forever on a server in trouble. */
const REQUEST_TIMEOUT_MS = 20_000;

const run = randomBytes(4).toString('hex');
let sequence = 0;

/** Creates one user; 'created' when acknowledged with 201. */
export async function createUser(ledger: Ledger, target: Target): Promise<'created' | 'refused'> {
  const to = target();
  const status = to ? await post(to.server, to.token, `chaos-${run}-${sequence++}@example.com`, ledger) : 'no answer';
  ledger.answers.set(status, (ledger.answers.get(status) ?? 0) + 1);
  return status === '201' ? 'created' : 'refused';
}

async function post(server: ServerProcess, token: string, email: string, ledger: Ledger): Promise<string> {
  try {
    const response = await fetch(`${server.base}/api/v2/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        connection: 'Username-Password-Authentication',
        email,
        password: 'correct horse battery',
      }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const body = await response.text();
    const status = String(response.status);
    if (status === '201') ledger.created.add(JSON.parse(body).user_id);
    else if (!ledger.samples.has(status)) ledger.samples.set(status, body.slice(0, 200));
    return status;
  } catch {
    return 'no answer';
  }
}

/**
 * Creates `count` users, `parallel` at a time, each sent to whichever node `target` names when it
 * starts. `after` runs after each answer (a fault triggered once enough users exist); no request starts
 * once `stop` holds. Returns how many requests were made.
 */
export async function burst(
  ledger: Ledger,
  options: { count: number; parallel: number; target: Target; after?: () => void; stop?: () => boolean },
): Promise<number> {
  let next = 0;
  await Promise.all(
    Array.from({ length: options.parallel }, async () => {
      while (next < options.count && !options.stop?.()) {
        next++;
        await createUser(ledger, options.target);
        options.after?.();
      }
    }),
  );
  return next;
}
