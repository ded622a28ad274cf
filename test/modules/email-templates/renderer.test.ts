import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { databaseKinds } from '../../helpers/databases.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

const PASSWORD = 'correct horse battery';
const LIMIT_MS = 1000;
/** Thread start-up on a first render, and a loaded machine: the answer still comes long before an unbounded render's. */
const MARGIN_MS = 1000;
/**
 * While templates render, /health and a read answer within this, as a rule (the median); none takes as
 * long as a render may. An event loop held by a render holds every probe for seconds; a busy shared
 * machine (the render threads compete for the same cores) delays one now and then by a few hundred ms.
 */
const PROMPT_MS = 100;
/**
 * One filter over two million items: liquidjs checks its time limit only between nodes and its memory
 * limit only on allocations, so on the event loop this ran for about 12 s and was accepted.
 */
const SLOW_BODY = '{% assign a = (1..2000000) %}{{ a | find_exp: "i", "i < 0" }}';
/** Fast for the sample user (and most users); slow for a user whose metadata says `n` is large. */
const DATA_DEPENDENT_BODY =
  '{% assign n = user.user_metadata.n | default: 1 %}{% assign a = (1..n) %}<p>Hi {{ user.name }}{{ a | find_exp: "i", "i < 0" }}</p><a href="{{ url }}">verify</a>';
const TIMED_OUT = `rendering took longer than the limit of ${LIMIT_MS} ms`;

async function timed<T>(run: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await run();
  return { value, ms: performance.now() - started };
}

for (const kind of databaseKinds()) {
  describe(`email template render limit (${kind})`, () => {
    let server: TestServer;
    let base: string;
    const logLines: Array<Record<string, unknown>> = [];
    let userCount = 0;

    before(async () => {
      const logStream = new PassThrough();
      logStream.on('data', (chunk: Buffer) => {
        for (const line of chunk.toString().split('\n')) if (line.trim() !== '') logLines.push(JSON.parse(line));
      });
      server = await startTestServer(kind, { LOG_LEVEL: 'warn', MAIL_WORKER: 'false' }, { logStream });
      // The render threads start on first use: this test measures renders, not their start.
      assert.equal((await patchTemplate({ subject: 'Warm-up' })).statusCode, 200);
      await server.app.listen({ host: '127.0.0.1', port: 0 });
      base = `http://127.0.0.1:${(server.app.server.address() as AddressInfo).port}`;
    });
    after(async () => {
      await server.close();
    });

    /** Real HTTP to the listening server, as a client on another machine would see it. */
    const call = (method: string, path: string, payload?: unknown) =>
      fetch(`${base}${path}`, {
        method,
        headers: {
          host: server.domain,
          authorization: `Bearer ${server.adminToken}`,
          ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(payload === undefined ? {} : { body: JSON.stringify(payload) }),
      });
    const getTemplate = async () => (await server.request({ url: '/api/v2/email-templates/verify_email' })).json();
    const patchTemplate = (payload: Record<string, unknown>) =>
      server.request({ method: 'PATCH', url: '/api/v2/email-templates/verify_email', payload });
    const newEmail = () => `limit${++userCount}@example.com`;
    const createUser = (payload: Record<string, unknown>) =>
      server.request({
        method: 'POST',
        url: '/api/v2/users',
        payload: { connection: 'Username-Password-Authentication', password: PASSWORD, ...payload },
      });
    const outboxRowFor = (recipient: string) =>
      server.services.database.db
        .selectFrom('email_outbox')
        .selectAll()
        .where('recipient', '=', recipient)
        .executeTakeFirst();
    const warnings = (message: string) => logLines.filter((line) => line.level === 40 && line.msg === message);

    it('refuses a template that renders past the limit with a 400 within the limit, stores nothing, and logs it', async () => {
      const before = await getTemplate();
      const { value: refused, ms } = await timed(() => patchTemplate({ body: SLOW_BODY, subject: 'changed' }));
      assert.deepEqual(refused.json(), {
        statusCode: 400,
        error: 'Bad Request',
        errorCode: 'invalid_body',
        message: `Invalid Liquid template in body: ${TIMED_OUT}`,
      });
      assert.ok(ms < LIMIT_MS + MARGIN_MS, `answered after ${Math.round(ms)} ms`);
      assert.deepEqual(await getTemplate(), before, 'nothing was stored');
      const [logged] = warnings(`Invalid Liquid template in body: ${TIMED_OUT}`);
      assert.equal(logged?.tenant, server.tenant.id, JSON.stringify(logLines));
      assert.equal(logged?.errorCode, 'invalid_body');
    });

    it('answers /health and the API promptly over HTTP while four such templates render at once', async (t) => {
      const before = await getTemplate();
      let rendering = true;
      const patches = Promise.all(
        Array.from({ length: 4 }, (_, i) =>
          call('PATCH', '/api/v2/email-templates/verify_email', { body: SLOW_BODY, subject: `slow ${i}` }),
        ),
      ).finally(() => {
        rendering = false;
      });
      const prompt: number[] = [];
      // Sequential probes while the PATCHes run: each one waits for an event loop a render would hold.
      while (rendering) {
        const health = await timed(() => fetch(`${base}/health`));
        assert.equal(health.value.status, 200);
        const read = await timed(() => call('GET', '/api/v2/email-templates/verify_email'));
        assert.equal(read.value.status, 200);
        prompt.push(health.ms, read.ms);
        // A write succeeds too; its password hash competes with the renders for the CPU, so its time is not
        // measured, and one is enough (on a loaded machine a hash per round would leave few rounds).
        if (prompt.length === 2) {
          const created = await call('POST', '/api/v2/users', {
            connection: 'Username-Password-Authentication',
            email: newEmail(),
            password: PASSWORD,
            verify_email: false,
          });
          assert.equal(created.status, 201, await created.text());
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      t.diagnostic(`/health and GET while rendering: ${prompt.map(Math.round).join(', ')} ms`);
      const sorted = [...prompt].sort((a, b) => a - b);
      assert.ok(sorted.at(-1)! < LIMIT_MS, `/health and GET took ${prompt.map(Math.round).join(', ')} ms`);
      assert.ok(
        sorted[Math.floor(sorted.length / 2)]! < PROMPT_MS,
        `/health and GET took ${prompt.map(Math.round).join(', ')} ms`,
      );
      assert.ok(prompt.length >= 10, `only ${prompt.length / 2} rounds of probes while rendering`);
      // Stopped at the limit, or refused for having waited that long behind another: never stored.
      const statuses = [];
      for (const response of await patches) {
        const body = (await response.json()) as { message: string };
        statuses.push(response.status);
        if (response.status === 429) continue;
        assert.equal(response.status, 400, JSON.stringify(body));
        assert.equal(body.message, `Invalid Liquid template in body: ${TIMED_OUT}`);
      }
      assert.ok(statuses.filter((status) => status === 400).length >= 2, statuses.join(' '));
      assert.deepEqual(await getTemplate(), before, 'nothing was stored');
    });

    it('renders a template that is slow only for some users: their email is recorded failed with the reason, within the limit', async () => {
      const saved = await patchTemplate({ body: DATA_DEPENDENT_BODY });
      assert.equal(saved.statusCode, 200, saved.body);

      // Users whose data keeps it quick get their email, rendered as before.
      const quick = newEmail();
      const created = await createUser({
        email: quick,
        name: 'Quick <Q>',
        user_metadata: { n: 3 },
        verify_email: true,
      });
      assert.equal(created.statusCode, 201, created.body);
      const row = await outboxRowFor(quick);
      assert.equal(row?.status, 'pending');
      assert.match(
        server.services.secretBox.open(row.body!),
        /^<p>Hi Quick &lt;Q&gt;<\/p><a href="https:\/\/[^"]+\/u\/email-verification\?ticket=[\w-]{43}">verify<\/a>$/,
      );

      // The user whose data makes it slow is created; the email fails, with the reason recorded, and is never sent.
      const slow = newEmail();
      const { value: accepted, ms } = await timed(() =>
        createUser({ email: slow, user_metadata: { n: 2_000_000 }, verify_email: true }),
      );
      assert.equal(accepted.statusCode, 201, accepted.body);
      assert.ok(ms < LIMIT_MS + MARGIN_MS, `answered after ${Math.round(ms)} ms`);
      const found = await server.request({ url: `/api/v2/users-by-email?email=${encodeURIComponent(slow)}` });
      assert.equal(found.json().length, 1, 'the user was created');
      const failed = await outboxRowFor(slow);
      assert.equal(failed?.status, 'failed');
      assert.equal(failed?.last_error, `The verify_email template could not be rendered: ${TIMED_OUT}`);
      assert.equal(failed?.body, null, 'nothing to send');

      // The job for an existing user whose data is slow: the job exists and reports the failure.
      const existing = newEmail();
      const quiet = await createUser({ email: existing, user_metadata: { n: 2_000_000 }, verify_email: false });
      assert.equal(quiet.statusCode, 201, quiet.body);
      const job = await timed(() =>
        server.request({
          method: 'POST',
          url: '/api/v2/jobs/verification-email',
          payload: { user_id: quiet.json().user_id },
        }),
      );
      assert.equal(job.value.statusCode, 201, job.value.body);
      assert.ok(job.ms < LIMIT_MS + MARGIN_MS, `answered after ${Math.round(job.ms)} ms`);
      assert.equal((await outboxRowFor(existing))?.status, 'failed');
      const status = await server.request({ url: `/api/v2/jobs/${job.value.json().id}` });
      assert.equal(status.json().status, 'failed');
    });
  });
}

describe('email template render queue', () => {
  let server: TestServer;

  before(async () => {
    server = await startTestServer('sqlite', { TEMPLATE_RENDER_THREADS: '1', TEMPLATE_RENDER_TIMEOUT_MS: '300' });
  });
  after(async () => {
    await server.close();
  });

  it('refuses renders that waited longer than the limit with a 429, instead of queueing slow templates behind one another', async () => {
    const warm = await server.request({
      method: 'PATCH',
      url: '/api/v2/email-templates/verify_email',
      payload: { subject: 'Warm' },
    });
    assert.equal(warm.statusCode, 200, warm.body);
    const started = performance.now();
    const answers = await Promise.all(
      Array.from({ length: 7 }, () =>
        server
          .request({
            method: 'PATCH',
            url: '/api/v2/email-templates/verify_email',
            payload: { body: SLOW_BODY },
          })
          .then((response) => ({ response, ms: performance.now() - started })),
      ),
    );
    const refused = answers.filter(({ response }) => response.statusCode === 429);
    const stopped = answers.filter(({ response }) => response.statusCode === 400);
    assert.ok(
      stopped.length >= 1 && refused.length >= 4 && stopped.length + refused.length === 7,
      answers.map(({ response }) => response.body).join('\n'),
    );
    for (const { response, ms } of refused) {
      assert.deepEqual(response.json(), {
        statusCode: 429,
        error: 'Too Many Requests',
        errorCode: 'too_many_requests',
        message: 'Too many email templates are being rendered at once; try again shortly.',
      });
      // Its wait (the limit) plus the render ahead of it (the limit) plus a replacement thread's start.
      assert.ok(ms < 2 * 300 + 2_500, `refused after ${Math.round(ms)} ms`);
    }
    for (const { response } of stopped) {
      assert.equal(
        response.json().message,
        'Invalid Liquid template in body: rendering took longer than the limit of 300 ms',
      );
    }
    // The pool still renders once the flood is over.
    const fine = await server.request({
      method: 'PATCH',
      url: '/api/v2/email-templates/verify_email',
      payload: { subject: 'Fine {{ user.email }}' },
    });
    assert.equal(fine.statusCode, 200, fine.body);
  });

  it('lets a burst of ordinary renders through: they queue, none is refused', async () => {
    // Sixteen on the one thread: each waits for those ahead of it, well within the limit even on a loaded
    // machine (48 waited past 300 ms there, and were rightly refused).
    const answers = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        server.request({
          method: 'PATCH',
          url: '/api/v2/email-templates/verify_email',
          payload: { subject: `Burst ${i} {{ user.email }}` },
        }),
      ),
    );
    assert.deepEqual([...new Set(answers.map((response) => response.statusCode))], [200]);
  });
});
