// The domain owner's approval page in a real browser (Debian's chromium): the link of an EMAIL
// validation mail shows the request, only the button approves, in English or German; then the
// worker issues the order.
import { join } from 'node:path';
import pino from 'pino';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { orderId } from '../../src/core/index.js';
import { createWorker } from '../../src/main.js';
import type { TestContext, TestCustomer } from '../support/app.js';
import { axeViolations, browserSite, chromiumPresent, SCREENSHOTS } from '../support/chromium.js';
import { testCsr } from '../support/csr.js';
import { ORDER_CONTACT } from '../support/issuing-context.js';

describe.skipIf(!chromiumPresent())('the e-mail approval page in chromium', () => {
  let site: Awaited<ReturnType<typeof browserSite>>;
  let t: TestContext;
  let c: TestCustomer;
  let browser: Browser;
  let base: string;

  beforeAll(async () => {
    site = await browserSite('Approvals');
    ({ t, customer: c, browser, base } = site);
  }, 120_000);
  afterAll(async () => site?.close());

  /** An EMAIL order's approval link, from the mail it sent. */
  const approvalLink = async () => {
    const res = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: {
        OrderParameters: {
          ProductCode: 'TrustPoint.DV',
          ValidityPeriod: 12,
          CSR: testCsr().pem,
          DVAuthMethod: 'EMAIL',
          ApproverEmail: 'hostmaster@certdesk-test.com',
        },
        AdminContact: ORDER_CONTACT,
        TechContact: ORDER_CONTACT,
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    const id = res.json().ServiceOrderID as number;
    const mails = await t.services.mailRepo.list({ limit: 10, orderId: orderId(id) });
    const path = mails.map((m) => /\/dcv\/approve\/cda_[A-Za-z0-9_-]+/.exec(m.text)?.[0]).find(Boolean);
    expect(path).toBeDefined();
    return { id, url: `${base}${path!}` };
  };

  it('ok/the link shows the request; only the button approves; the order is then issued (German)', async () => {
    const { id, url } = await approvalLink();
    const context = await browser.newContext({ locale: 'de-DE' });
    const page = await context.newPage();
    await page.goto(url);
    expect(await page.locator('h1').textContent()).toBe('Ein Zertifikat bestätigen');
    expect(await page.locator('main').textContent()).toContain('www.certdesk-test.com');
    await page.screenshot({ path: join(SCREENSHOTS, 'approval-de.png'), fullPage: true });
    // Looking changes nothing.
    const status = async () =>
      (await t.call(c.token, { method: 'GET', url: `/rest/v1/Order/${id}` })).json().OrderInfo.OrderStatus;
    expect((await status()).MinorStatus).toBe('WF_EMAIL_AUTH');
    await page.getByRole('button', { name: 'Bestätigen' }).click();
    await expect.poll(() => page.locator('h1').textContent()).toBe('Bestätigt');
    const worker = createWorker(t.services, pino({ level: 'silent' }));
    for (let i = 0; i < 10 && (await worker.runOnce()) > 0; i++);
    expect((await status()).MajorStatus).toBe('COMPLETE');
    // The same link again: nothing more to do.
    await page.goto(url);
    expect(await page.locator('h1').textContent()).toBe('Bereits beantwortet');
    await context.close();
  });

  it('ok/English; a strict CSP; axe-core finds no serious or critical violation; a bad link is a plain 404', async () => {
    const { url } = await approvalLink();
    const res = await fetch(url, { headers: { 'accept-language': 'en' } });
    expect(res.headers.get('content-security-policy')).not.toContain('unsafe-inline');
    expect(await res.text()).toContain('Approve a certificate');
    const context = await browser.newContext({ bypassCSP: true, locale: 'en-US' });
    const page = await context.newPage();
    await page.goto(url);
    expect(await axeViolations(page)).toEqual([]);
    const bad = await page.goto(`${base}/dcv/approve/cda_not-a-real-token-at-all-000`);
    expect(bad?.status()).toBe(404);
    expect(await page.locator('h1').textContent()).toBe('Link not valid');
    expect(await axeViolations(page)).toEqual([]);
    await context.close();
  });
});
