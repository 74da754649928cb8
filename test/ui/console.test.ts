// The customer console in a real browser (Debian's chromium): sign in with a password and a TOTP
// code, order a DV certificate by DNS with a key made in the browser until it is issued, and
// download it; an application's secret shown once; a voucher made here and redeemed by a
// stranger in a fresh browser; a READONLY user kept from ordering; German; axe-core on every
// main screen; keyboard only. Screenshots go to .tmp/screenshots (copies of the main ones in docs/).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Secret, TOTP } from 'otpauth';
import pino from 'pino';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker } from '../../src/main.js';
import type { TestContext, TestCustomer } from '../support/app.js';
import { browser as httpBrowser, hiddenFields } from '../support/browser.js';
import { axeViolations, browserSite, chromiumPresent, SCREENSHOTS } from '../support/chromium.js';
import type { TestDnsServer } from '../support/dns-server.js';
import { verifyDelivered } from '../support/openssl-checks.js';

const PASSWORD = 'Saturn-vanilla-42-drift';

describe.skipIf(!chromiumPresent())('the customer console in chromium', () => {
  let site: Awaited<ReturnType<typeof browserSite>>;
  let t: TestContext;
  let c: TestCustomer;
  let dns: TestDnsServer;
  let browser: Browser;
  let base: string;
  let secret: string;
  const admin = 'ada.console';
  const reader = 'rita.console';

  beforeAll(async () => {
    site = await browserSite('Console');
    ({ t, customer: c, browser, base, dns } = site);
    for (const [username, roles] of [
      [admin, ['ADMIN']],
      [reader, ['READONLY']],
    ] as const) {
      const res = await t.call(c.token, {
        method: 'POST',
        url: '/rest/v1/User',
        payload: {
          FullName: 'Ada Lovelace',
          Email: 'ada@certdesk-test.com',
          Username: username,
          Password: PASSWORD,
          Roles: roles,
          Mobile: '+49 30 1234567',
        },
      });
      expect(res.statusCode, res.body).toBe(200);
    }
    // The ADMIN enrols a second factor (over HTTP; the browser test signs in with it).
    const web = httpBrowser(base);
    const form = await web.send('GET', '/signin');
    await web.send('POST', '/signin', { username: admin, password: PASSWORD, ...hiddenFields(form.text) });
    const enrol = await web.send('GET', '/account/two-factor');
    secret = /<code>([A-Z2-7 ]+)<\/code>/.exec(enrol.text)![1]!.replace(/ /g, '');
    const done = await web.send('POST', '/account/two-factor', { ...hiddenFields(enrol.text), code: codeFor(0) });
    expect(done.status).toBe(200);
  }, 120_000);
  afterAll(async () => site?.close());

  /** The code an authenticator app shows at the service's (test) time, `steps` steps on. */
  const codeFor = (steps: number) =>
    new TOTP({ secret: Secret.fromBase32(secret) }).generate({ timestamp: (t.clock.nowSeconds() + steps * 30) * 1000 });
  /** A fresh code: the service's clock moves on one TOTP step (each step's code is good once). */
  const nextCode = () => {
    t.clock.advance(30);
    return codeFor(0);
  };

  /** A browser signed in as `username` (with the TOTP step for the ADMIN), on the overview. */
  const signedIn = async (username: string, locale = 'en-US'): Promise<{ context: BrowserContext; page: Page }> => {
    // axe-core is injected as a script, which the pages' CSP rightly forbids (the CSP itself is
    // checked over HTTP in test/console.test.ts).
    const context = await browser.newContext({ acceptDownloads: true, locale, bypassCSP: true });
    // A step that cannot be done fails with its locator named, well inside the test's own bound.
    context.setDefaultTimeout(20_000);
    const page = await context.newPage();
    await page.goto(`${base}/`);
    await page.getByLabel(/^(Username|Benutzername)$/).fill(username);
    await page.getByLabel(/^(Password|Passwort)$/).fill(PASSWORD);
    await page.getByRole('button', { name: /^(Sign in|Anmelden)$/ }).click();
    if (username === admin) {
      await page.getByLabel(/authenticator/i).fill(nextCode());
      await page.getByRole('button', { name: /^(Continue|Weiter)$/ }).click();
    }
    await page.waitForURL(`${base}/`);
    return { context, page };
  };
  const shot = (page: Page, name: string) =>
    page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
  const runWorker = async () => {
    const worker = createWorker(t.services, pino({ level: 'silent' }));
    while ((await worker.runOnce()) > 0);
  };

  it('ok/sign in with TOTP → order a DV certificate by DNS with a key made in the browser → check now → issued → downloaded, openssl verifies', async () => {
    const { context, page } = await signedIn(admin);
    expect(await page.locator('h1').textContent()).toBe('Overview');
    expect(await page.locator('main').textContent()).toContain('Credit');
    await shot(page, 'console-overview');
    expect(await axeViolations(page)).toEqual([]);

    await page.getByRole('link', { name: 'Order a certificate' }).click();
    await page.getByLabel('Product').selectOption('TrustPoint.DV');
    await page.getByRole('button', { name: 'Show the price' }).click();
    await expect.poll(() => page.locator('main').textContent()).toContain('Price:');
    await page.getByLabel(/Names for the certificate/).fill('www.certdesk-test.com certdesk-test.com');
    await page.getByRole('button', { name: 'Make a key and request in this browser' }).click();
    await expect.poll(() => page.locator('#csr').inputValue()).toContain('BEGIN CERTIFICATE REQUEST');
    const keyHref = (await page.locator('#key-link').getAttribute('href'))!;
    expect(Buffer.from(keyHref.split(',')[1]!, 'base64').toString()).toContain('BEGIN PRIVATE KEY');
    await page.getByLabel('How you show control of the names').selectOption('DNS');
    await shot(page, 'console-order-new');
    expect(await axeViolations(page)).toEqual([]);
    await page.getByRole('button', { name: 'Place the order' }).click();
    await page.waitForURL(/\/orders\/\d+/);
    expect(await page.locator('main').textContent()).toContain('The order was placed.');

    // The page shows exactly the record to publish; published, "check now" validates and issues.
    const cells = await page.locator('table.publish code').allTextContents();
    expect(cells[0]).toBe('TXT');
    dns.set(cells[1]!.replace(/\.$/, ''), [{ type: 'TXT', data: cells[2]! }]);
    await shot(page, 'console-order-dcv');
    await page.getByRole('button', { name: 'Check now' }).click();
    await expect.poll(() => page.locator('#status').textContent()).toMatch(/^COMPLETE/);
    await shot(page, 'console-order-issued');
    expect(await axeViolations(page)).toEqual([]);
    const download = async (name: string) => {
      const [file] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name }).click()]);
      return readFileSync((await file.path())!, 'utf8');
    };
    const certificate = await download('Certificate (PEM)');
    const intermediate = await download('Intermediate certificates (PEM)');
    expect(verifyDelivered(t.services.ca, { certificate, intermediate }, t.clock.nowSeconds())).toMatch(/: OK/);
    expect(await download('PKCS#7 bundle')).toContain('BEGIN PKCS7');

    // The order list finds it by a part of its name.
    await page.getByRole('link', { name: 'Orders', exact: true }).click();
    await page.getByLabel('Common name contains').fill('certdesk-test');
    await page.getByLabel('Status').selectOption('COMPLETE');
    await page.getByRole('button', { name: 'Filter' }).click();
    await expect.poll(() => page.locator('main table tbody tr').count()).toBeGreaterThan(0);
    await shot(page, 'console-orders');
    expect(await axeViolations(page)).toEqual([]);
    await context.close();
  });

  it('ok/an application: created, its secret shown once, gone on the next visit', async () => {
    const { context, page } = await signedIn(admin);
    await page.getByRole('link', { name: 'API applications' }).click();
    await page.getByLabel('Name', { exact: true }).fill('deploy bot');
    await page.getByLabel('order', { exact: true }).check();
    await page.getByRole('button', { name: 'Create an application' }).click();
    const shown = await page.locator('#secret').textContent();
    expect(shown).toMatch(/^cds_/);
    await shot(page, 'console-applications');
    expect(await axeViolations(page)).toEqual([]);
    await page.reload();
    await page.goto(`${base}/applications`);
    expect(await page.locator('#secret').count()).toBe(0);
    expect(await page.content()).not.toContain(shown!);
    await context.close();
  });

  it('ok/a voucher made here, redeemed by a stranger in a fresh browser, the certificate collected', async () => {
    const { context, page } = await signedIn(admin);
    await page.getByRole('link', { name: 'Vouchers' }).click();
    await page.getByLabel('Product').selectOption('TrustPoint.DV');
    await page.getByRole('button', { name: 'Create a voucher' }).click();
    await expect.poll(() => page.locator('main').textContent()).toContain('Created.');
    const link = (await page.locator('button.copy').first().getAttribute('data-copy'))!;
    expect(link).toMatch(/\/redeem#code=/);
    await shot(page, 'console-vouchers');
    expect(await axeViolations(page)).toEqual([]);
    await context.close();

    const stranger = await browser.newContext({ locale: 'en-US', bypassCSP: true });
    const r = await stranger.newPage();
    // The link is made of the service's public URL (CERTDESK_PUBLIC_URL); this test's listener is on another port.
    const { pathname, hash } = new URL(link);
    await r.goto(`${base}${pathname}${hash}`);
    await r.getByRole('button', { name: 'Show what it pays for' }).click();
    await expect.poll(() => r.locator('#terms').textContent()).toContain('TrustPoint.DV');
    await r.getByLabel(/Names for the certificate/).fill('shop.certdesk-test.com');
    await r.getByRole('button', { name: 'Make a key and request in this browser' }).click();
    await expect.poll(() => r.locator('#csr').inputValue()).toContain('BEGIN CERTIFICATE REQUEST');
    await r.getByLabel('How you show control of the names').selectOption('DNS');
    await r.getByLabel('First name').fill('Sam');
    await r.getByLabel('Last name').fill('Stranger');
    await r.getByLabel('E-mail').fill('sam@certdesk-test.com');
    await r.getByLabel('Phone').fill('+49 30 7654321');
    await r.getByRole('button', { name: 'Redeem' }).click();
    await expect.poll(() => r.locator('#order-id').textContent()).toMatch(/^\d+$/);
    const [, at, value] = await r.locator('#dcv dd').allTextContents();
    dns.set(at!.replace(/\.$/, ''), [{ type: 'TXT', data: value! }]);
    await runWorker();
    await r.getByRole('button', { name: 'Check now' }).click();
    await expect.poll(() => r.locator('#cert-link').isVisible()).toBe(true);
    const href = (await r.locator('#cert-link').getAttribute('href'))!;
    const certificate = Buffer.from(href.split(',')[1]!, 'base64').toString('utf8');
    const chain = Buffer.from((await r.locator('#chain-link').getAttribute('href'))!.split(',')[1]!, 'base64').toString(
      'utf8',
    );
    expect(verifyDelivered(t.services.ca, { certificate, intermediate: chain }, t.clock.nowSeconds())).toMatch(/: OK/);
    await stranger.close();
  });

  it('fail/a READONLY user sees no ordering, and the ordering page refuses; its orders and vouchers it may read', async () => {
    const { context, page } = await signedIn(reader);
    const menu = await page.locator('nav ul.menu').textContent();
    expect(menu).not.toContain('Order a certificate');
    expect(menu).toContain('Orders');
    expect(menu).not.toContain('Users');
    const res = await page.goto(`${base}/order/new`);
    expect(res!.status()).toBe(403);
    expect(await page.locator('main [role=alert]').textContent()).toContain('Your roles do not allow this.');
    expect(await page.locator('form[action^="/order/new"]').count()).toBe(0);
    await shot(page, 'console-readonly-refused');
    await page.goto(`${base}/vouchers`);
    expect(await page.getByRole('button', { name: 'Create a voucher' }).count()).toBe(0);
    await context.close();
  });

  it('ok/German renders, dates in the person’s time zone; users, keys and the profile pass axe-core', async () => {
    const { context, page } = await signedIn(admin, 'de-DE');
    await page.goto(`${base}/?lang=de`);
    expect(await page.locator('h1').textContent()).toBe('Übersicht');
    await shot(page, 'console-overview-de');
    await page.goto(`${base}/orders?lang=de`);
    expect(await page.locator('h1').textContent()).toBe('Bestellungen');
    // German dates: "24.11.2026, 10:00"-style in the customer's zone.
    expect(await page.locator('main table tbody td').nth(4).textContent()).toMatch(
      /^\d{2}\.\d{2}\.\d{4}, \d{2}:\d{2}$/,
    );
    expect(await axeViolations(page)).toEqual([]);
    for (const [path, name] of [
      ['/users', 'console-users'],
      ['/keys', 'console-keys'],
      ['/profile', 'console-profile'],
    ] as const) {
      await page.goto(`${base}${path}`);
      await shot(page, name);
      expect(await axeViolations(page), path).toEqual([]);
    }
    await context.close();
  });

  it('ok/by keyboard only: sign in, the code step, the menu, a filter', async () => {
    const context = await browser.newContext({ locale: 'en-US' });
    const page = await context.newPage();
    await page.goto(`${base}/orders`);
    await page.keyboard.press('Tab');
    await page.keyboard.type(admin);
    await page.keyboard.press('Tab');
    await page.keyboard.type(PASSWORD);
    await page.keyboard.press('Enter');
    await page.waitForURL(/\/signin\/code/);
    await page.keyboard.press('Tab');
    await page.keyboard.type(nextCode());
    await page.keyboard.press('Enter');
    await page.waitForURL(/\/orders/);
    expect(await page.locator('h1').textContent()).toBe('Orders');
    // The first Tab reaches the menu; Enter follows the link.
    await page.keyboard.press('Tab');
    expect(await page.locator(':focus').textContent()).toBe('Overview');
    await page.keyboard.press('Enter');
    await page.waitForURL(`${base}/?lang=en`);
    await context.close();
  });
});
