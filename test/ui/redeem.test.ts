// The voucher redeemer's page in a real browser (Debian's chromium): enter the code, see what it
// pays for, make a key and CSR in the browser, redeem with DNS validation, publish the record on
// the loopback DNS server, follow the order to its certificate and download it; openssl verifies it.
import { join } from 'node:path';
import pino from 'pino';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker } from '../../src/main.js';
import type { TestContext, TestCustomer } from '../support/app.js';
import { axeViolations, browserSite, chromiumPresent, SCREENSHOTS } from '../support/chromium.js';
import type { TestDnsServer } from '../support/dns-server.js';
import { verifyDelivered } from '../support/openssl-checks.js';

describe.skipIf(!chromiumPresent())('the voucher redemption page in chromium', () => {
  let site: Awaited<ReturnType<typeof browserSite>>;
  let t: TestContext;
  let dns: TestDnsServer;
  let seller: TestCustomer;
  let browser: Browser;
  let base: string;

  beforeAll(async () => {
    site = await browserSite('Seller');
    ({ t, dns, customer: seller, browser, base } = site);
  }, 120_000);
  afterAll(async () => site?.close());

  const voucher = async () => {
    const res = await t.call(seller.token, {
      method: 'POST',
      url: '/rest/v1/Voucher',
      payload: { OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12 } },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().VoucherCode as string;
  };

  it('ok/code → terms → key and CSR made in the browser → DNS → certificate downloaded; openssl verifies it', async () => {
    const code = await voucher();
    const context = await browser.newContext({ acceptDownloads: true, locale: 'en-US' });
    const page = await context.newPage();
    await page.goto(`${base}/redeem`);
    await page.getByLabel('Voucher code').fill(code.toLowerCase());
    await page.getByRole('button', { name: 'Show what it pays for' }).click();
    await expect.poll(() => page.locator('#terms').textContent()).toContain('TrustPoint.DV');
    await page.screenshot({ path: join(SCREENSHOTS, 'redeem-terms.png'), fullPage: true });

    await page.getByLabel(/Names for the certificate/).fill('www.certdesk-test.com certdesk-test.com');
    await page.getByRole('button', { name: 'Make a key and request in this browser' }).click();
    await expect.poll(() => page.locator('#csr').inputValue()).toContain('BEGIN CERTIFICATE REQUEST');
    expect(await page.locator('#key-link').isVisible()).toBe(true);
    await page.getByLabel('How you show control of the names').selectOption('DNS');
    await page.getByLabel('First name').fill('Ada');
    await page.getByLabel('Last name').fill('Lovelace');
    await page.getByLabel('E-mail').fill('ada@certdesk-test.com');
    await page.getByLabel('Phone').fill('+49 30 1234567');
    await page.getByRole('button', { name: 'Redeem' }).click();
    await expect
      .poll(
        async () => `${await page.locator('#order-id').textContent()} ${await page.locator('#status').textContent()}`,
      )
      .toMatch(/^\d+ /);

    // The record the page shows, published; the worker validates and issues.
    const values = await page.locator('#dcv dd').allTextContents();
    const [, at, value] = values;
    dns.set(at!.replace(/\.$/, ''), [{ type: 'TXT', data: value! }]);
    await page.screenshot({ path: join(SCREENSHOTS, 'redeem-dcv.png'), fullPage: true });
    const worker = createWorker(t.services, pino({ level: 'silent' }));
    while ((await worker.runOnce()) > 0);
    await page.getByRole('button', { name: 'Check now' }).click();
    await expect.poll(() => page.locator('#cert-link').isVisible()).toBe(true);
    await page.screenshot({ path: join(SCREENSHOTS, 'redeem-issued.png'), fullPage: true });

    // What each download link holds (a data: URL made in the page), offered as a file to save.
    const downloaded = async (id: string) => {
      expect(await page.locator(id).getAttribute('download')).toMatch(/\.(pem|p7b)$/);
      const href = (await page.locator(id).getAttribute('href'))!;
      expect(href).toMatch(/^data:application\/x-pem-file;base64,/);
      return Buffer.from(href.split(',')[1]!, 'base64').toString('utf8');
    };
    const certificate = await downloaded('#cert-link');
    const intermediate = await downloaded('#chain-link');
    expect(verifyDelivered(t.services.ca, { certificate, intermediate }, t.clock.nowSeconds())).toMatch(/: OK/);
    expect(await downloaded('#key-link')).toContain('BEGIN PRIVATE KEY');
    // The order belongs to the seller.
    const orders = (await t.call(seller.token, { method: 'GET', url: '/rest/v1/Orders' })).json().OrderInfos;
    expect(orders.some((o: { OrderStatus: { MajorStatus: string } }) => o.OrderStatus.MajorStatus === 'COMPLETE')).toBe(
      true,
    );
    await context.close();
  });

  it('fail/an unknown code is said plainly; German renders', async () => {
    const context = await browser.newContext({ locale: 'de-DE' });
    const page = await context.newPage();
    await page.goto(`${base}/redeem`);
    expect(await page.locator('h1').textContent()).toBe('Gutschein einlösen');
    await page.getByLabel('Gutscheincode').fill('ABCD-EFGH-JKMN-PQRS-TVWX-YZ23');
    await page.getByRole('button', { name: 'Anzeigen, was er bezahlt' }).click();
    await expect.poll(() => page.locator('#status').textContent()).toContain('voucher token is invalid');
    expect(await page.locator('#step-order').isVisible()).toBe(false);
    await page.screenshot({ path: join(SCREENSHOTS, 'redeem-de.png'), fullPage: true });
    await context.close();
  });

  it('ok/a strict CSP, no framing; axe-core finds no serious or critical violation; works by keyboard', async () => {
    const res = await fetch(`${base}/redeem`);
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).toContain("frame-ancestors 'none'");
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    // axe's script is injected: this one context bypasses the CSP that would rightly refuse it.
    const context = await browser.newContext({ bypassCSP: true });
    const page = await context.newPage();
    await page.goto(`${base}/redeem`);
    expect(await axeViolations(page)).toEqual([]);
    // Keyboard only: Tab to the code field, type, Enter submits.
    const code = await voucher();
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    expect(
      await page.evaluate(
        () => (globalThis as unknown as { document: { activeElement?: { id: string } } }).document.activeElement?.id,
      ),
    ).toBe('code');
    await page.keyboard.type(code);
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('#step-order').isVisible()).toBe(true);
    expect(await axeViolations(page)).toEqual([]);
    await context.close();
  });
});
