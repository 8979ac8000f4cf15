/**
 * The web pages in a real headless Chromium (Debian's `chromium`, driven by playwright-core),
 * against the real daemon with real ingests: log in through the form, the overview, find a
 * package by external_id and open it, download a file through its link (same bytes), a failed
 * deposit's error on the status report, another user's package refused (403 page), an admin
 * starting an audit and watching it finish, logout. On every page: no console errors, and axe-core
 * finds no serious or critical accessibility violation. An external_id with <, > and & is shown
 * as text, never as markup.
 *
 * Screenshots of each page go to PRESERVD_SCREENSHOTS (docs/screenshots holds current ones),
 * else to .tap/screenshots. Without /usr/bin/chromium the test is skipped, loudly, unless
 * PRESERVD_REQUIRE_BROWSER=1 (CI sets it), when it fails.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import type { AxeResults } from 'axe-core';
import { chromium, type Browser, type Page } from 'playwright-core';
import t, { type Test } from 'tap';
import { repoRoot, TestDaemon } from '../helpers/daemon.js';
import { ingestBag } from '../helpers/ingest.js';

const CHROMIUM = '/usr/bin/chromium';
const axeSource = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
const screenshots = resolve(repoRoot, process.env.PRESERVD_SCREENSHOTS ?? '.tap/screenshots');

if (!existsSync(CHROMIUM)) {
  const reason = `${CHROMIUM} is missing: the browser tests cannot run (Debian: apt-get install --no-install-recommends chromium)`;
  if (process.env.PRESERVD_REQUIRE_BROWSER === '1') t.fail(`${reason}, and PRESERVD_REQUIRE_BROWSER=1`);
  else {
    process.stderr.write(`\n*** SKIPPING THE BROWSER TESTS: ${reason} ***\n\n`);
    t.plan(0, reason);
  }
} else {
  t.test('the pages in Chromium', { timeout: 300_000 }, async (t) => {
    // Audits read slowly (about 1 kB/s over two packages of about 1 kB each), so the audit page
    // is seen in progress and must refresh itself to show the end.
    const d = await TestDaemon.start(t, { config: { audit: { rateLimitMBps: 0.001 } } });
    const alice = d.addUser('alice');
    const bob = d.addUser('bob');
    const tricky = 'R&D <draft> "#7" & more';
    const bytes = Buffer.from([0, 1, 2, 255, 254, 10, 13, 60, 62, 38, ...Buffer.from('tape one\n')]);
    const stored = await ingestBag(
      d,
      alice,
      { 'audio/side A.wav': bytes, 'notes.txt': 'liner notes\n' },
      { externalId: tricky, contentType: 'audio' },
    );
    const failed = await ingestBag(
      d,
      alice,
      { 'b.txt': 'broken\n' },
      { payloadOxum: '1.1', expect: 'FAILED' },
    );
    const bobs = await ingestBag(d, bob, { 'c.txt': 'bob’s\n' });

    mkdirSync(screenshots, { recursive: true });
    const browser: Browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    t.teardown(() => browser.close());

    /** A fresh browser window, recording console errors and uncaught exceptions. */
    const open = async () => {
      // bypassCSP lets the test inject axe-core; the pages themselves run under their policy.
      const context = await browser.newContext({
        acceptDownloads: true,
        bypassCSP: true,
        viewport: { width: 1280, height: 860 },
      });
      const page = await context.newPage();
      const errors: string[] = [];
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(`${page.url()}: ${m.text()}`);
      });
      page.on('pageerror', (e) => errors.push(`${page.url()}: ${e.message}`));
      return { page, errors };
    };

    /** Checks the page now shown: axe-core, then a screenshot. */
    const check = async (t: Test, page: Page, name: string) => {
      await page.addScriptTag({ path: axeSource });
      const results = (await page.evaluate(() =>
        (window as unknown as { axe: { run(): Promise<unknown> } }).axe.run(),
      )) as AxeResults;
      const bad = results.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
      t.same(
        bad.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`),
        [],
        `${name}: no serious or critical accessibility violation`,
      );
      await page.screenshot({ path: join(screenshots, `${name}.png`), fullPage: true });
    };

    await t.test('a depositor', async (t) => {
      const { page, errors } = await open();
      const first = await page.goto(`${d.url}/`);
      t.equal(new URL(page.url()).pathname, '/login', 'without a session: the login page');
      t.equal(first?.status(), 200);
      await check(t, page, 'login');

      await page.getByLabel('Token').fill('wrong');
      await page.getByRole('button', { name: 'Log in' }).click();
      t.equal(await page.getByRole('alert').textContent(), 'That token is unknown or revoked.');
      await page.getByLabel('Token').fill(alice);
      await page.getByRole('button', { name: 'Log in' }).click();
      await page.waitForURL(`${d.url}/`);
      t.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'Overview');
      t.match(await page.locator('.counts').innerText(), /1\s+done[\s\S]*1\s+failed/);
      await check(t, page, 'overview');

      // Find the package by its external_id and open it.
      await page.getByRole('link', { name: 'Packages', exact: true }).click();
      await page.getByLabel('bag_id or external_id').fill('<draft>');
      await page.getByRole('button', { name: 'Search' }).click();
      t.equal(await page.locator('#results-summary').textContent(), '1 package.');
      await check(t, page, 'packages');
      const raw = await (await page.request.get(page.url())).text();
      t.ok(
        raw.includes('R&amp;D &lt;draft&gt; &quot;#7&quot; &amp; more'),
        'the external_id is escaped in the HTML',
      );
      t.notOk(raw.includes('<draft>'), 'never written as markup');
      await page.getByRole('link', { name: tricky }).click();
      await page.waitForURL(`${d.url}/packages/${stored.request.bag_id}`);
      t.equal(
        await page.getByRole('heading', { level: 1 }).textContent(),
        `Package ${tricky}`,
        'shown as text',
      );
      t.equal(await page.locator('draft').count(), 0, 'no <draft> element was made');
      const rows = await page.locator('table[aria-labelledby="files"] tbody tr').allInnerTexts();
      t.equal(rows.length, 2);
      t.match(rows[0], /^audio\/side A\.wav\s+19\s+md5 [0-9a-f]{32}\s+sha256 [0-9a-f]{64}/);
      t.match(rows[1], /^notes\.txt\s+12\s/);
      t.equal(
        await page.getByRole('link', { name: 'Download the whole bag as a zip' }).getAttribute('href'),
        `/v1/packages/${stored.request.bag_id}/download`,
      );
      t.equal(await page.locator('#replicas').count(), 0, 'no storage details for a depositor');
      await check(t, page, 'package');

      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.getByRole('link', { name: 'audio/side A.wav' }).click(),
      ]);
      t.equal(download.suggestedFilename(), 'side A.wav');
      t.same(readFileSync(await download.path()), bytes, 'the same bytes');

      await page.getByRole('link', { name: 'Status report' }).click();
      const failedRow = page.locator('table[aria-labelledby="failed"] tbody tr');
      t.equal(await failedRow.count(), 1);
      t.match(
        await failedRow.innerText(),
        new RegExp(`^${failed.item.id}\\s+${failed.request.external_id}\\s+video[\\s\\S]*Payload-Oxum`),
      );
      t.equal(await page.locator('table[aria-labelledby="done"] tbody tr').count(), 1);
      await check(t, page, 'queue');

      const refused = await page.goto(`${d.url}/packages/${bobs.request.bag_id}`);
      t.equal(refused?.status(), 403);
      t.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'You may not see this');
      await check(t, page, 'forbidden');
      const missing = await page.goto(`${d.url}/packages/no-such-package`);
      t.equal(missing?.status(), 404);
      await check(t, page, 'not-found');
      t.equal((await page.goto(`${d.url}/audits`))?.status(), 403, 'audits are for admins');

      await page.goto(`${d.url}/`);
      await page.getByRole('button', { name: 'Log out' }).click();
      await page.waitForURL(`${d.url}/login`);
      t.equal((await page.goto(`${d.url}/queue`))?.url(), `${d.url}/login`, 'logged out');
      // Chromium reports each 4xx document it loads as a console error; those are the three above.
      t.same(
        errors.filter((e) => !/the server responded with a status of (401|403|404)/.test(e)),
        [],
        'no console errors beyond the refusals asked for',
      );
      t.same(
        errors.map((e) => /status of (\d{3})/.exec(e)?.[1]),
        ['401', '403', '404', '403'],
        'the 401 of the wrong token, the 403, the 404 and the 403 of /audits',
      );
    });

    await t.test('an admin starts an audit and watches it finish', async (t) => {
      const { page, errors } = await open();
      await page.goto(`${d.url}/login`);
      await page.getByLabel('Token').fill(d.adminToken);
      await page.getByRole('button', { name: 'Log in' }).click();
      await page.waitForURL(`${d.url}/`);
      await page.getByRole('link', { name: 'Audits' }).click();
      await check(t, page, 'audits');
      await page.getByRole('button', { name: 'Start an audit now' }).click();
      await page.waitForURL(/\/audits\/\d+$/);
      t.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'Audit 1');
      t.equal(await page.locator('#audit-state').textContent(), 'not yet: in progress');
      await check(t, page, 'audit-running');
      // The page refreshes itself (audit-progress.js) until the audit is done.
      await page.locator('#audit-outcome').waitFor({ timeout: 60_000 });
      t.equal(await page.locator('#audit-outcome').textContent(), 'Every package passed.');
      t.equal(await page.locator('[data-field="successes"]').textContent(), '2');
      await check(t, page, 'audit');

      await page.goto(`${d.url}/packages/${stored.request.bag_id}`);
      t.match(
        await page.locator('dl.facts').innerText(),
        new RegExp(`Storage location\\s+\\S+/storage/\\S+/urn%3auuid%3a${stored.request.bag_id}`),
      );
      t.equal(await page.locator('#replicas').textContent(), 'Replicas', 'the replicas section, for admins');
      await page.goto(`${d.url}/`);
      t.match(await page.locator('main').innerText(), /Audit 1, started .*: all 2 packages passed/);
      await check(t, page, 'overview-admin');
      t.same(errors, [], 'no console errors');
    });
  });
}
