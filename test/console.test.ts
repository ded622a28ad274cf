import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { gunzipSync } from 'node:zlib';
import type { Browser, Page } from 'puppeteer-core';
import { transaction } from '../src/db/database.ts';
import { mailboxDir } from '../src/mail/mailbox.ts';
import { startDnsServer, type TestDnsServer } from './helpers/dns-server.ts';
import { ADMIN_ID, ADMIN_SECRET, startTestServer, type TestServer } from './helpers/server.ts';
import { startWebhookReceiver, type WebhookReceiver } from './helpers/webhook-receiver.ts';

// Functions handed to page.evaluate run in the page: its globals are declared for this file only (the
// tests are typed for Node, without the DOM library).
declare const document: any;
declare const window: any;
declare const localStorage: any;
declare const sessionStorage: any;

const run = promisify(execFile);
const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));
/** The project: test/run.mjs runs the tests from a compiled copy inside its node_modules/.cache. */
const PROJECT = process.cwd().replace(/\/node_modules\/\.cache\/.*$/, '');
const EDGE = 'edge.console.test';
/** The first load's budget, compressed: the page, its script and its style sheet. */
const FIRST_LOAD_BUDGET = 200 * 1024;
/** With UPDATE_SCREENSHOTS=1 the README's screenshots are written anew; otherwise to a scratch folder. */
const SHOTS = process.env.UPDATE_SCREENSHOTS
  ? path.join(PROJECT, 'docs', 'console')
  : fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-console-shots-'));

describe('the console at /console', () => {
  let server: TestServer;
  let dns: TestDnsServer;
  let receiver: WebhookReceiver;
  let base: string;
  before(async () => {
    // The assets as `npm ci` builds them, from the current sources.
    await run(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import('./scripts/build-console.mjs').then((m) => m.buildConsole(process.cwd(), process.argv[1]))`,
        // Where the server under test reads them: dist/ beside the src/ it runs from.
        path.join(process.cwd(), 'dist', 'console'),
      ],
      { cwd: PROJECT },
    );
    dns = await startDnsServer();
    receiver = await startWebhookReceiver();
    server = await startTestServer('sqlite', {
      TENANT_DOMAIN: 'localhost',
      DNS_SERVERS: dns.address,
      CUSTOM_DOMAIN_EDGE_DOMAIN: EDGE,
      DELIVERY_ALLOW_HTTP: 'true',
      DELIVERY_RETRY_SCHEDULE_MS: '50,100,200',
      DELIVERY_POLL_MS: '20',
      DELIVERY_TIMEOUT_MS: '2000',
    });
    await server.app.listen({ port: 0, host: '127.0.0.1' });
    const address = server.app.server.address();
    assert.ok(address && typeof address === 'object');
    // localhost: the tenant's domain, and a secure context for the browser (the copy button's clipboard).
    base = `http://localhost:${address.port}`;
  });
  after(async () => {
    await server.close();
    await receiver.close();
    await dns.close();
  });

  it('serves the page and its assets without a token, under a strict CSP, within the size budget', async () => {
    let compressed = 0;
    for (const file of ['/console', '/console/console.js', '/console/console.css']) {
      const response = await fetch(`${base}${file}`);
      assert.equal(response.status, 200, file);
      const csp = response.headers.get('content-security-policy') ?? '';
      assert.match(csp, /default-src 'self'/);
      assert.match(csp, /script-src 'self'(;|$)/, 'no inline or eval script');
      assert.match(csp, /style-src 'self'(;|$)/, 'no inline style');
      assert.match(csp, /frame-ancestors 'none'/);
      assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
      // The bytes on the wire, as a browser asking for gzip receives them.
      const wire = await server.app.inject({ url: file, headers: { 'accept-encoding': 'gzip, deflate, br' } });
      assert.equal(wire.headers['content-encoding'], 'gzip', file);
      compressed += wire.rawPayload.length;
      if (file === '/console') {
        const html = gunzipSync(wire.rawPayload).toString();
        assert.doesNotMatch(html, /<script>|<style|style=/, 'no inline script or style');
      }
    }
    // gzip only where the header admits it: a weight of 0 refuses it (RFC 9110 §12.5.3).
    for (const [header, gzip] of [
      ['gzip;q=0', false],
      ['gzip;q=0, *', false],
      ['br, identity', false],
      ['*', true],
      ['GZIP;Q=0.5', true],
      ['x-gzip', true],
      ['deflate, *;q=0.1', true],
    ] as const) {
      const wire = await server.app.inject({ url: '/console/console.css', headers: { 'accept-encoding': header } });
      assert.equal(wire.headers['content-encoding'], gzip ? 'gzip' : undefined, header);
      assert.equal(wire.headers.vary, 'accept-encoding');
    }
    console.log(`console first load: ${compressed} bytes gzip`);
    assert.ok(compressed < FIRST_LOAD_BUDGET, `first load is ${compressed} bytes compressed`);
    // The same on every host, like /docs: no tenant needed.
    const elsewhere = await server.app.inject({ url: '/console', headers: { host: 'unknown.example' } });
    assert.equal(elsewhere.statusCode, 200);
  });

  it('in Chromium: signs in, shows failed deliveries, redelivers, tests and toggles a stream, verifies a domain and makes it default, shows emails, users, segments; keyboard-usable, no serious axe violations', async (t) => {
    if (!CHROMIUM) {
      if (process.env.CI) assert.fail('Chromium is required in CI (.ci/run installs the Debian package)');
      return t.skip('chromium is not installed (apt-get install chromium)');
    }
    // Real failed deliveries: the receiver refuses the first two events with 400 (no retry), then accepts.
    receiver.program([400, 400], 204);
    const created = await server.request({
      method: 'POST',
      url: '/api/v2/event-streams',
      payload: {
        name: 'orders-webhook',
        subscriptions: [{ event_type: 'user.created' }],
        destination: {
          type: 'webhook',
          configuration: {
            webhook_endpoint: receiver.url,
            webhook_authorization: { method: 'bearer', token: 'receiver-token' },
          },
        },
      },
    });
    assert.equal(created.statusCode, 201, created.body);
    const stream = created.json() as { id: string };
    for (const email of ['ada@example.com', 'grace@example.com']) {
      const user = await server.request({
        method: 'POST',
        url: '/api/v2/users',
        payload: { connection: 'Username-Password-Authentication', password: 'correct horse battery', email },
      });
      assert.equal(user.statusCode, 201, user.body);
    }
    await receiver.waitFor((r) => r.length >= 2);
    const failedIds = receiver.requests.map((r) => r.json().id as string);
    await waitFor(async () => {
      const count = await server.request({ url: `/api/v2/event-streams/${stream.id}/deliveries/count` });
      return count.json().count === 2;
    }, 'two failed deliveries');
    const domain = await server.request({
      method: 'POST',
      url: '/api/v2/custom-domains',
      payload: { domain: 'login.console.test', type: 'svc_managed_certs' },
    });
    assert.equal(domain.statusCode, 201, domain.body);
    dns.setCname('login.console.test', domain.json().verification.methods[0].record);
    const reader = await server.clientWithScopes(['read:event_streams']);

    const { default: puppeteer } = await import('puppeteer-core');
    const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-chromium-'));
    let browser: Browser | undefined;
    try {
      browser = await puppeteer.launch({
        executablePath: CHROMIUM,
        headless: true,
        userDataDir: profile,
        args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'],
      });
      const page = await browser.newPage();
      // Run through tsx (TEST_TSX=1), the functions handed to page.evaluate keep their names through
      // esbuild's `__name(…)` calls, a helper of this file's module that the page does not have.
      await page.evaluateOnNewDocument('globalThis.__name = (target) => target;');
      await page.setViewport({ width: 1200, height: 860 });
      const problems: string[] = [];
      page.on('console', (message) => {
        if (message.type() === 'error') problems.push(message.text());
      });
      page.on('pageerror', (error) => problems.push(String(error)));
      const requested: string[] = [];
      page.on('request', (request) => requested.push(request.url()));

      await page.goto(`${base}/console`, { waitUntil: 'load' });
      // Keyboard only: the sign-in form has the focus; type, Tab, type, Enter.
      await page.waitForSelector('#client-id', { timeout: 5000 }).catch(async (error: Error) => {
        throw new Error(`${error.message}; page errors: ${JSON.stringify(problems)}; ${await page.content()}`);
      });
      assert.equal(await page.evaluate(() => document.activeElement?.id), 'client-id');
      await page.keyboard.type(ADMIN_ID);
      await page.keyboard.press('Tab');
      await page.keyboard.type(ADMIN_SECRET);
      await page.keyboard.press('Enter');
      await page.waitForSelector('a[href^="#/streams/"]');
      assert.equal(await text(page, 'tbody tr td:nth-child(1)'), 'orders-webhook');
      assert.match(await text(page, 'tbody tr td:nth-child(3)'), /2 failing in a row/);
      await axe(page, 'event streams');
      await page.screenshot({ path: path.join(SHOTS, 'streams.png') });

      // The stream: the two failed deliveries, their attempts, the chart.
      await page.click('a[href^="#/streams/"]');
      await page.waitForFunction(() => document.querySelectorAll('tr[data-event]').length === 2);
      const shown = await page.$$eval('tr[data-event]', (rows) => rows.map((r) => r.getAttribute('data-event')));
      assert.deepEqual(new Set(shown), new Set(failedIds));
      assert.match(await text(page, 'figcaption'), /0 delivered, 2 failed/);
      await page.click('button[aria-controls^="attempts-"]');
      assert.match(await text(page, 'tr[id^="attempts-"]:not([hidden])'), /failed/);
      // The live panel: the stream's attempts so far, newest first, with their errors.
      await page.waitForFunction(() => document.querySelectorAll('#live-attempts tbody tr').length === 2);
      const liveRows = () =>
        page.$$eval('#live-attempts tbody tr', (rows) =>
          rows.map((r) => ({
            attempt: r.getAttribute('data-attempt'),
            status: r.querySelector('.live-status')?.textContent,
            text: (r as { innerText?: string }).innerText ?? '',
          })),
        );
      const initial = await liveRows();
      assert.deepEqual(new Set(initial.map((r) => r.attempt)), new Set(failedIds.map((id) => `${id} 1`)));
      for (const r of initial) {
        assert.equal(r.status, 'failed');
        assert.match(r.text, /user\.created[\s\S]*400/, 'the type and the error shown');
      }
      assert.equal(await page.$eval('#live-pause', (b) => b.getAttribute('aria-pressed')), 'false');
      await axe(page, 'event stream');
      await page.screenshot({ path: path.join(SHOTS, 'event-stream.png'), fullPage: true });

      // Keyboard only: Tab reaches every control, each with a name.
      await page.evaluate('document.activeElement && document.activeElement.blur()');
      const reached: string[] = [];
      for (let i = 0; i < 50; i++) {
        await page.keyboard.press('Tab');
        reached.push(
          String(
            await page.evaluate(
              "(document.activeElement.getAttribute('aria-label') || document.activeElement.textContent || document.activeElement.id || '').trim()",
            ),
          ),
        );
      }
      for (const control of [
        'Event streams',
        'Custom domains',
        'Sign out',
        'Send test event',
        'Disable stream',
        'Pause',
      ]) {
        assert.ok(reached.includes(control), `Tab reaches "${control}": ${JSON.stringify(reached)}`);
      }
      for (const control of ['Apply filters', 'Redeliver all matching…', `Redeliver ${shown[0]}`]) {
        assert.ok(reached.includes(control), `Tab reaches "${control}"`);
      }
      assert.ok(!reached.includes(''), 'every control reached has a name');

      // Redeliver one with the keyboard: Tab to its button, Enter; the dialog opens on Cancel (nothing is
      // done by a stray Enter); Tab to Confirm, Enter. Then see it delivered.
      const first = shown[0]!;
      await page.evaluate('document.activeElement && document.activeElement.blur()');
      // Marks this page: a reload would lose it.
      await page.evaluate('window.notReloaded = true');
      for (let i = 0; i < 60; i++) {
        await page.keyboard.press('Tab');
        if ((await page.evaluate("document.activeElement.getAttribute('aria-label')")) === `Redeliver ${first}`) break;
      }
      await page.keyboard.press('Enter');
      await page.waitForSelector('dialog[open]');
      assert.match(await text(page, '#confirm-message'), new RegExp(first));
      assert.equal(await page.evaluate('document.activeElement.textContent'), 'Cancel');
      await axe(page, 'confirmation dialog');
      await page.keyboard.press('Tab');
      assert.equal(await page.evaluate('document.activeElement.id'), 'confirm-ok');
      await page.keyboard.press('Enter');
      await page.waitForFunction(
        (id) => document.querySelector(`tr[data-event="${id}"] td:nth-child(3)`)?.textContent === 'delivered',
        { timeout: 20_000 },
        first,
      );
      assert.equal(receiver.requests.at(-1)!.json().id, first);
      // The live panel polled the new attempts in, on top, without a reload: the redelivery queued
      // (retrying, attempt 2), then delivered (attempt 3).
      await page.waitForFunction(
        (id) =>
          document.querySelector('#live-attempts tbody tr')?.getAttribute('data-attempt') === `${id} 3` &&
          document.querySelector('#live-attempts tbody tr .live-status')?.textContent === 'delivered',
        { timeout: 10_000 },
        first,
      );
      assert.deepEqual(
        (await liveRows()).slice(0, 2).map((r) => [r.attempt, r.status]),
        [
          [`${first} 3`, 'delivered'],
          [`${first} 2`, 'retrying'],
        ],
      );
      assert.equal(await page.evaluate('window.notReloaded'), true, 'the page was not reloaded');
      assert.equal((await liveRows()).length, 4, 'each attempt shown once');

      // Redeliver the window: the count it will queue is shown before confirming.
      await page.click('#redeliver-window');
      await page.waitForSelector('dialog[open]');
      assert.match(await text(page, '#confirm-message'), /Queue 1 failed delivery/);
      await page.click('#confirm-ok');
      await receiver.waitFor((r) => r.filter((x) => x.json().id === shown[1]).length === 2, 10_000);
      // The page has its answer too (the receiver may hear of it first) before the next action.
      await announced(page, /^1 delivery queued again\.$/);

      // Paused, the live panel asks for nothing: a test event's attempt shows only once resumed.
      await page.waitForFunction(() => document.querySelectorAll('#live-attempts tbody tr').length === 6, {
        timeout: 10_000,
      });
      await page.click('#live-pause');
      assert.equal(await page.$eval('#live-pause', (b) => b.getAttribute('aria-pressed')), 'true');
      const pausedAt = requested.length;
      await page.click('::-p-text(Send test event)');
      await announced(page, /^Test user\.created event queued\.$/);
      const testEvent = await receiver.waitFor((r) => r.some((x) => x.json().a0purpose === 'test'), 10_000);
      const testId = testEvent.find((x) => x.json().a0purpose === 'test')!.json().id as string;
      await new Promise((resolve) => setTimeout(resolve, 2500));
      assert.ok(!requested.slice(pausedAt).some((url) => url.includes('/attempts')), 'no poll while paused');
      assert.equal((await liveRows()).length, 6);
      await page.click('#live-pause');
      assert.equal(await page.$eval('#live-pause', (b) => b.getAttribute('aria-pressed')), 'false');
      await page.waitForFunction(
        (id) => document.querySelector('#live-attempts tbody tr')?.getAttribute('data-attempt') === `${id} 1`,
        { timeout: 10_000 },
        testId,
      );
      // A hidden tab asks nothing either, and resumes when shown again.
      await page.evaluate(() => {
        Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
        document.dispatchEvent(new window.Event('visibilitychange'));
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      const hiddenAt = requested.length;
      await new Promise((resolve) => setTimeout(resolve, 2500));
      assert.ok(!requested.slice(hiddenAt).some((url) => url.includes('/attempts')), 'no poll while hidden');
      await page.evaluate(() => {
        delete document.visibilityState;
        document.dispatchEvent(new window.Event('visibilitychange'));
      });
      await waitFor(
        async () => requested.slice(hiddenAt).some((url) => url.includes('/attempts')),
        'polling to resume once the tab is shown',
      );
      // A test event, then disable (confirmed) and enable again.
      await page.click('::-p-text(Disable stream)');
      await page.waitForSelector('dialog[open]');
      await page.click('#confirm-ok');
      await page.waitForSelector('::-p-text(Enable stream)');
      const disabled = await server.request({ url: `/api/v2/event-streams/${stream.id}` });
      assert.equal(disabled.json().status, 'disabled');
      await page.click('::-p-text(Enable stream)');
      await page.waitForSelector('dialog[open]');
      await page.click('#confirm-ok');
      await page.waitForSelector('::-p-text(Disable stream)');
      assert.equal((await server.request({ url: `/api/v2/event-streams/${stream.id}` })).json().status, 'enabled');

      // Custom domains: the record to publish, verify now against the loopback DNS server.
      await page.click('a[href="#/domains"]');
      const leftStreamAt = requested.length;
      await page.waitForSelector('section[data-domain="login.console.test"]');
      assert.match(await text(page, 'section[data-domain] .domain-status'), /pending_verification/);
      await page.waitForFunction(
        "document.querySelector('section[data-domain] .domain-certificate')?.textContent.startsWith('None')",
      );
      assert.equal(
        await text(page, 'section[data-domain] .domain-certificate'),
        'None: the default certificate is served (until the domain is ready).',
      );
      await page.screenshot({ path: path.join(SHOTS, 'custom-domains.png') });
      // The copy button puts the record's value on the clipboard.
      await browser
        .defaultBrowserContext()
        .overridePermissions(base, ['clipboard-read', 'clipboard-write', 'clipboard-sanitized-write']);
      await page.click('::-p-text(Copy value)');
      await announced(page, /^Copied/);
      assert.equal(await page.evaluate('navigator.clipboard.readText()'), domain.json().verification.methods[0].record);
      const verify = await page.$$('section[data-domain] button');
      assert.equal(await verify[1]!.evaluate((b) => b.textContent), 'Verify now');
      await verify[1]!.click();
      await page.waitForFunction(
        () => document.querySelector('section[data-domain] .domain-status')?.textContent === 'ready',
      );
      // Ready, but this server issues no certificates (no CUSTOM_DOMAIN_CERT_SOURCE): the default one is served.
      await page.waitForFunction(
        "document.querySelector('section[data-domain] .domain-certificate')?.textContent.includes('no certificate source')",
      );
      assert.equal(
        await text(page, 'section[data-domain] .domain-certificate'),
        'None: the default certificate is served (the server has no certificate source for svc-managed domains).',
      );
      // Make it the default, confirmed.
      await page.click('::-p-text(Make default)');
      await page.waitForSelector('dialog[open]');
      await page.click('#confirm-ok');
      await page.waitForFunction(
        "document.querySelector('section[data-domain] h2')?.textContent.endsWith('(default)')",
      );
      const defaultDomain = await server.request({ url: '/api/v2/custom-domains/default' });
      assert.equal(defaultDomain.json().domain, 'login.console.test');
      await axe(page, 'custom domains');
      await page.screenshot({ path: path.join(SHOTS, 'custom-domains-verified.png') });

      // Emails: the outbox, newest first, with the failure of one that could not be sent.
      for (const [to, failure] of [
        ['ada@example.com', undefined],
        ['grace@example.com', 'Mail server refused the recipient'],
      ] as const) {
        await transaction(server.services.database, (trx) =>
          server.services.mailOutbox.queue(trx, {
            tenantId: server.tenant.id,
            template: 'verify_email',
            from: 'login@example.com',
            to,
            subject: 'Verify your email',
            html: '<p>Verify</p>',
            ...(failure ? { failure } : {}),
          }),
        );
      }
      await page.click('a[href="#/emails"]');
      await page.waitForSelector('tr[data-email]');
      assert.match(await text(page, 'tbody'), /grace@example\.com[\s\S]*Mail server refused the recipient/);
      await axe(page, 'emails');
      await page.screenshot({ path: path.join(SHOTS, 'emails.png') });

      // The development mailbox: ada's verification email (sent when she was created), opened whole.
      const mailbox = mailboxDir(server.database.dataDir);
      const verification = await eventuallyValue(async () => {
        const outbox = (await server.request({ url: '/api/v2/emails/outbox?status=sent' })).json();
        return outbox.emails.find(
          (e: { id: string; to: string }) =>
            e.to === 'ada@example.com' &&
            fs.readFileSync(path.join(mailbox, `${e.id}.json`), 'utf8').includes('ticket='),
        )?.id as string | undefined;
      }, "ada's verification email in the mailbox");
      const sentHtml = JSON.parse(fs.readFileSync(path.join(mailbox, `${verification}.json`), 'utf8')).html as string;
      const ticketLink = /href="([^"]+ticket=[^"]+)"/.exec(sentHtml)![1]!;
      // A domain not ready: not offered for the preview.
      const pendingDomain = await server.request({
        method: 'POST',
        url: '/api/v2/custom-domains',
        payload: { domain: 'pending.console.test', type: 'svc_managed_certs' },
      });
      assert.equal(pendingDomain.statusCode, 201, pendingDomain.body);
      await page.click('a[href="#/streams"]');
      await page.waitForSelector('a[href^="#/streams/"]');
      await page.click('a[href="#/emails"]');
      await page.waitForSelector(`tr[data-email="${verification}"] button`);
      assert.equal(
        await page.$eval(`tr[data-email="${verification}"] button`, (b) => b.getAttribute('aria-label')),
        'Open the email to ada@example.com',
      );
      await page.focus(`tr[data-email="${verification}"] button`);
      await page.keyboard.press('Enter');
      await page.waitForSelector(`section[data-message="${verification}"] iframe`);
      assert.equal(await page.evaluate('document.activeElement.id'), 'message-title', 'focus moves to the email');
      const frameAttributes = await page.$eval(`section[data-message="${verification}"] iframe`, (f) => ({
        sandbox: f.getAttribute('sandbox'),
        title: f.getAttribute('title'),
        src: f.getAttribute('src'),
      }));
      assert.deepEqual(frameAttributes, { sandbox: '', title: 'Body of the email to ada@example.com', src: null });
      const headersShown = await text(page, `section[data-message="${verification}"] dl`);
      for (const expected of [
        /From\s+no-reply@localhost/,
        /To\s+ada@example\.com/,
        /Subject\s+Verify your email/,
        new RegExp(`Message-ID\\s+<${verification}@tenantry>`),
        /Date\s+\w{3}, \d\d \w{3} \d{4}/,
        /MIME-Version\s+1\.0/,
        /Content-Type\s+text\/html; charset=utf-8/,
      ])
        assert.match(headersShown, expected);
      const body = await frameContent(page, 'Verify my email');
      assert.match(body.text, /Please confirm that ada@example\.com is your email address/);
      assert.deepEqual(body.links, [ticketLink], 'the link as sent');
      await axe(page, 'an email of the mailbox');
      await page.screenshot({ path: path.join(SHOTS, 'email-message.png'), fullPage: true });

      // The verification template previewed by the server for the ready custom domain: an unsaved
      // subject, first with Liquid that does not parse (the refusal beside the body), then fixed.
      const savedTemplate = (await server.request({ url: '/api/v2/email-templates/verify_email' })).json();
      assert.deepEqual(
        await page.$$eval('#tpl-domain option', (options) => options.map((o) => o.value)),
        ['', 'login.console.test'],
        'the default domain and the ready custom domains',
      );
      await page.select('#tpl-domain', 'login.console.test');
      await page.$eval('#tpl-subject', (i) => (i.value = ''));
      await page.type('#tpl-subject', 'Welcome to {{ custom_domain.domain }}');
      await page.$eval('#tpl-body', (t) => (t.value = `{% if %}${t.value}`));
      await page.click('::-p-text(Preview)');
      await page.waitForSelector('#tpl-body-error:not([hidden])');
      assert.match(await text(page, '#tpl-body-error'), /^Invalid Liquid template in body: /);
      assert.equal(
        await page.$eval('#tpl-body', (t) => `${t.getAttribute('aria-invalid')} ${t.getAttribute('aria-describedby')}`),
        'true tpl-body-error',
      );
      assert.equal(await page.evaluate('document.activeElement.id'), 'tpl-body');
      await page.$eval('#tpl-body', (t) => (t.value = t.value.replace('{% if %}', '')));
      await page.click('::-p-text(Preview)');
      await page.waitForSelector('#preview iframe');
      assert.equal(await page.$eval('#tpl-body-error', (e) => e.hidden), true, 'the error is gone');
      assert.equal(await page.$eval('#preview iframe', (f) => f.getAttribute('sandbox')), '');
      const previewFacts = await text(page, '#preview dl');
      assert.match(previewFacts, /Domain\s+login\.console\.test/);
      assert.match(previewFacts, /Subject\s+Welcome to login\.console\.test/);
      const previewBody = await frameContent(page, 'jane.doe@example.com');
      assert.deepEqual(previewBody.links, [
        'https://login.console.test/u/email-verification?ticket=preview-not-a-ticket',
      ]);
      assert.deepEqual(
        (await server.request({ url: '/api/v2/email-templates/verify_email' })).json(),
        savedTemplate,
        'a preview saves nothing',
      );
      await axe(page, 'template preview');
      await page.screenshot({ path: path.join(SHOTS, 'email-preview.png'), fullPage: true });

      // Users by email, and a verification email sent from there.
      await page.click('a[href="#/users"]');
      await page.waitForSelector('#user-email');
      await page.type('#user-email', 'ada@example.com');
      await page.keyboard.press('Enter');
      await page.waitForSelector('button[aria-label="Send verification email to ada@example.com"]');
      await axe(page, 'users');
      await page.screenshot({ path: path.join(SHOTS, 'users.png') });
      await page.click('button[aria-label="Send verification email to ada@example.com"]');
      await page.waitForSelector('dialog[open]');
      await page.click('#confirm-ok');
      await announced(page, /^Verification email queued/);

      // Segments and CAPTCHA, read only.
      const segment = await server.request({
        method: 'POST',
        url: '/api/v2/experimentation/segments',
        payload: { name: 'Beta testers', description: 'Sign-ins from the US', rules: [{ match: { country: ['US'] } }] },
      });
      assert.equal(segment.statusCode, 201, segment.body);
      await page.click('a[href="#/settings"]');
      await page.waitForFunction("document.querySelector('main dl.facts')?.textContent.includes('Active provider')");
      assert.match(await text(page, 'main tbody'), /Beta testers/);
      await axe(page, 'segments and CAPTCHA');
      await page.screenshot({ path: path.join(SHOTS, 'segments-captcha.png') });

      // Edit the segment: an invalid name, refused by the API, its message beside the field; then rules
      // that are not JSON; then fixed with the keyboard, and saved (as the API then says).
      await page.click('button[aria-label="Edit segment Beta testers"]');
      await page.waitForSelector('#segment-name');
      await page.$eval('#segment-name', (i) => (i.value = 'B'));
      await page.click('::-p-text(Save segment)');
      await page.waitForSelector('#segment-name-error:not([hidden])');
      assert.match(await text(page, '#segment-name-error'), /^Payload validation error: .* on property name/);
      assert.equal(
        await page.$eval(
          '#segment-name',
          (i) => `${i.getAttribute('aria-invalid')} ${i.getAttribute('aria-describedby')}`,
        ),
        'true segment-name-error',
      );
      assert.equal(await page.$eval('#segment-rules-error', (e) => e.hidden), true, 'only the field concerned');
      await axe(page, 'segment refused');
      await page.screenshot({ path: path.join(SHOTS, 'segment-edit.png'), fullPage: true });
      await page.$eval('#segment-rules', (t) => (t.value = '[{"match": {"planet": ["Mars"]}}]'));
      await page.$eval('#segment-name', (i) => (i.value = 'Beta testers EU'));
      await page.click('::-p-text(Save segment)');
      await page.waitForSelector('#segment-rules-error:not([hidden])');
      assert.match(await text(page, '#segment-rules-error'), /planet/);
      assert.equal(await page.$eval('#segment-name-error', (e) => e.hidden), true, 'the fixed field is clear');
      assert.equal(await page.evaluate('document.activeElement.id'), 'segment-rules');
      await page.keyboard.down('Control');
      await page.keyboard.press('a');
      await page.keyboard.up('Control');
      await page.keyboard.type('[{"match": {"country": ["DE", "FR"]}}]');
      await page.keyboard.press('Tab');
      await page.keyboard.press('Enter');
      await announced(page, /^Segment Beta testers EU saved\.$/);
      await page.waitForFunction("document.querySelector('main tbody')?.textContent.includes('Beta testers EU')");
      const edited = (await server.request({ url: `/api/v2/experimentation/segments/${segment.json().id}` })).json();
      assert.equal(edited.name, 'Beta testers EU');
      assert.equal(edited.description, 'Sign-ins from the US');
      assert.deepEqual(edited.rules, [{ match: { country: ['DE', 'FR'] } }]);
      // Deleting asks first; cancelled, nothing is deleted.
      await page.click('button[aria-label="Delete segment Beta testers EU"]');
      await page.waitForSelector('dialog[open]');
      assert.match(
        await text(page, '#confirm-message'),
        /Delete the segment Beta testers EU\? This cannot be undone\./,
      );
      assert.equal(await page.evaluate('document.activeElement.textContent'), 'Cancel');
      await page.keyboard.press('Enter');
      await page.waitForSelector('dialog:not([open])');
      assert.equal(
        (await server.request({ url: `/api/v2/experimentation/segments/${segment.json().id}` })).statusCode,
        200,
      );

      // CAPTCHA: a provider's settings without its secret are refused beside the secret; with it, the
      // change of provider is confirmed first.
      await page.select('#captcha-provider', 'hcaptcha');
      await page.type('#captcha-site_key', 'site-key-123');
      await page.click('::-p-text(Save CAPTCHA)');
      await page.waitForSelector('dialog[open]');
      assert.match(await text(page, '#confirm-message'), /Make hcaptcha the active CAPTCHA provider/);
      await page.click('#confirm-ok');
      await page.waitForSelector('#captcha-secret-error:not([hidden])');
      assert.match(await text(page, '#captcha-secret-error'), /secret/);
      assert.notEqual(
        (await server.request({ url: '/api/v2/attack-protection/captcha' })).json().active_provider_id,
        'hcaptcha',
      );
      await page.type('#captcha-secret', 'hcaptcha-secret');
      await page.click('::-p-text(Save CAPTCHA)');
      await page.waitForSelector('dialog[open]');
      await page.click('#confirm-ok');
      await announced(page, /^CAPTCHA configuration saved\.$/);
      const captcha = (await server.request({ url: '/api/v2/attack-protection/captcha' })).json();
      assert.equal(captcha.active_provider_id, 'hcaptcha');
      assert.deepEqual(captcha.hcaptcha, { site_key: 'site-key-123' });
      await axe(page, 'CAPTCHA saved');

      // Since the stream's page was left (many seconds ago), its live panel asked nothing more (but for
      // a poll already under way then, which the browser may report just after).
      const afterLeaving = requested.slice(leftStreamAt).filter((url) => url.includes('/attempts'));
      assert.ok(afterLeaving.length <= 1, `no poll once the view is left: ${JSON.stringify(afterLeaving)}`);

      // A client with fewer scopes: what it cannot see is said so.
      await page.click('#sign-out');
      await signIn(page, reader.clientId, reader.clientSecret);
      // Still on the segments view, which this client may not see; nor the emails and domains.
      await page.waitForSelector('.notice');
      assert.match(await text(page, '.notice'), /hidden.*read:experimentation/);
      await page.click('a[href="#/emails"]');
      await page.waitForFunction("document.querySelector('.notice')?.textContent.includes('read:email_outbox')");
      assert.match(await text(page, '.notice'), /hidden.*read:email_outbox/);
      await page.click('a[href="#/domains"]');
      await page.waitForFunction("document.querySelector('.notice')?.textContent.includes('read:custom_domains')");
      await page.screenshot({ path: path.join(SHOTS, 'hidden-view.png') });
      await page.click('a[href="#/streams"]');
      await page.waitForSelector('a[href^="#/streams/"]');

      // The API's refusals the journey provoked are logged by the browser as failed loads; nothing else.
      const refusedLoads = /^Failed to load resource: the server responded with a status of 400 \(Bad Request\)$/;
      assert.equal(problems.filter((p) => refusedLoads.test(p)).length, 4, JSON.stringify(problems));
      assert.deepEqual(
        problems.filter((p) => !refusedLoads.test(p)),
        [],
        'no script errors and no CSP refusals',
      );
      // data: URLs are the browser's own (the date picker's icon), not fetched.
      const offsite = requested.filter((url) => !url.startsWith(base) && !url.startsWith('data:'));
      assert.deepEqual(offsite, [], 'nothing is loaded from anywhere else');
      assert.ok(!requested.some((url) => /secret|token=/.test(url)), 'no secret in a URL');
      const stored = await page.evaluate(() => localStorage.length + sessionStorage.length + document.cookie.length);
      assert.equal(stored, 0, 'nothing kept in storage that outlives the tab');
    } finally {
      await browser?.close();
      fs.rmSync(profile, { recursive: true, force: true });
    }
  });
});

async function eventuallyValue<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * The text and links of the sandboxed frame showing `expected`: read through the debugger,
 * as the page itself cannot (the frame's origin is opaque).
 */
async function frameContent(page: Page, expected: string): Promise<{ text: string; links: string[] }> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    for (const frame of page.frames()) {
      if (frame === page.mainFrame()) continue;
      const content = await frame
        .evaluate(() => ({
          text: document.body?.innerText ?? '',
          links: [...document.querySelectorAll('a')].map((a: any) => a.getAttribute('href')),
        }))
        .catch(() => undefined);
      if (content?.text.includes(expected)) return content;
    }
    if (Date.now() > deadline) assert.fail(`no frame shows ${expected}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const text = (page: Page, selector: string) =>
  page.$eval(selector, (element) => (element as { innerText?: string }).innerText ?? element.textContent ?? '');

/** Waits for the page's live region to announce `message`; fails with what it says instead. */
async function announced(page: Page, message: RegExp): Promise<void> {
  const deadline = Date.now() + 15_000;
  let said: string;
  while (!message.test((said = await text(page, '#status')))) {
    if (Date.now() > deadline) assert.fail(`the page said ${JSON.stringify(said)}, not ${message}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function signIn(page: Page, id: string, secret: string): Promise<void> {
  await page.waitForSelector('#client-id');
  await page.type('#client-id', id);
  await page.type('#client-secret', secret);
  await page.keyboard.press('Enter');
}

const AXE_SOURCE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** axe-core run in the page (injected through the debugger, not a script tag: the CSP allows none). */
async function axe(page: Page, where: string): Promise<void> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const result = await (window as unknown as { axe: { run(): Promise<{ violations: any[] }> } }).axe.run();
    return result.violations.map((v: any) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length, help: v.help }));
  });
  const serious = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  assert.deepEqual(serious, [], `${where}: ${JSON.stringify(violations)}`);
}
