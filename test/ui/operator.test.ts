// The operator screens in a real browser (Debian's chromium): an operator signs in by keyboard
// with password and TOTP code, approves an OV order the site's customer placed over the API, sees
// it leave the queue, and the order is issued; every screen screenshotted, checked by axe-core,
// and one in German.
import { join } from 'node:path';
import pino from 'pino';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker } from '../../src/main.js';
import { totpOf } from '../../src/ra/accounts/two-factor.js';
import type { CreatedOperator } from '../../src/ra/operators/operators.js';
import type { TestContext, TestCustomer } from '../support/app.js';
import { axeViolations, browserSite, chromiumPresent, SCREENSHOTS } from '../support/chromium.js';
import { testCsr } from '../support/csr.js';
import { dnsOrderBody, ORG_ADDRESS, ORG_CONTACT } from '../support/issuing-context.js';

describe.skipIf(!chromiumPresent())('the operator screens in chromium', () => {
  let site: Awaited<ReturnType<typeof browserSite>>;
  let t: TestContext;
  let c: TestCustomer;
  let browser: Browser;
  let base: string;
  let olga: CreatedOperator;

  const work = async () => {
    const worker = createWorker(t.services, pino({ level: 'silent' }));
    for (let i = 0; i < 10 && (await worker.runOnce()) > 0; i++);
  };
  const status = async (id: number) =>
    (await t.call(c.token, { method: 'GET', url: `/rest/v1/Order/${id}` })).json().OrderInfo.OrderStatus;

  beforeAll(async () => {
    site = await browserSite('Operated Browser Co');
    ({ t, customer: c, browser, base } = site);
    olga = await t.services.operators.add('olga');
    // The DCV proof of the test CSR, so that the OV order's names validate at once.
    const value = (
      await t.call(c.token, {
        method: 'POST',
        url: '/rest/v1/DNSData',
        payload: { CSR: testCsr().pem, ProductCode: 'TrustPoint.DV' },
      })
    ).json().DNSAuthDetails.DNSValue as string;
    site.dns.set('certdesk-test.com', [{ type: 'TXT', data: value }]);
    // Something on each screen: a failed job, and a CRL.
    const now = t.clock.nowSeconds();
    const { id } = await t.services.jobs.enqueue({ name: 'ca.refresh-crls', payload: {}, runAt: now + 3600 }, now);
    await t.db.kysely
      .updateTable('jobs')
      .set({ status: 'dead', attempts: 10, last_error: 'connect ECONNREFUSED 127.0.0.1:5432' })
      .where('id', '=', id)
      .execute();
    await t.services.ca.refreshCrl(t.services.ca.crlIssuers()[0]!);
  }, 120_000);
  afterAll(async () => site?.close());

  /** An OV order placed over the REST API by the site's customer, waiting for vetting after the worker's DCV check. */
  const ovOrder = async () => {
    const res = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/Order',
      payload: {
        ...dnsOrderBody({ ProductCode: 'TrustPoint.OV' }),
        AdminContact: ORG_CONTACT,
        TechContact: ORG_CONTACT,
        OrganizationInfo: { OrganizationName: ORG_CONTACT.OrganizationName, OrganizationAddress: ORG_ADDRESS },
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    const id = res.json().ServiceOrderID as number;
    await work();
    expect((await status(id)).MinorStatus).toBe('WF_ORG_VALIDATION');
    return id;
  };

  /** Signs in with the keyboard only: username, Tab, password, Enter; then the code, Enter. */
  const signInByKeyboard = async (page: Page) => {
    await page.goto(`${base}/operator/signin`);
    // The field is autofocused; chromium moves the focus at a rendering step that may come after
    // the load event, so wait for it rather than race it with a Tab.
    await expect.poll(() => page.evaluate('document.activeElement?.id'), { timeout: 15_000 }).toBe('u');
    await page.keyboard.type(olga.username);
    await page.keyboard.press('Tab');
    await page.keyboard.type(olga.password);
    await page.screenshot({ path: join(SCREENSHOTS, 'operator-signin.png') });
    await Promise.all([page.waitForURL(/\/operator\/signin\/code/), page.keyboard.press('Enter')]);
    expect(await page.locator('h1').textContent()).toBe('Operator sign-in: code');
    await expect.poll(() => page.evaluate('document.activeElement?.id'), { timeout: 15_000 }).toBe('c');
    t.clock.set(t.clock.nowSeconds() + 30);
    await page.keyboard.type(
      totpOf(olga.totpSecret, olga.username).generate({ timestamp: t.clock.nowSeconds() * 1000 }),
    );
    await Promise.all([page.waitForURL(/\/operator\?lang=en$/), page.keyboard.press('Enter')]);
    expect(await page.locator('h1').textContent()).toBe('Operator overview');
  };

  it('ok/an operator signs in by keyboard, approves an OV order from the queue; it leaves the queue and is issued', async () => {
    const id = await ovOrder();
    const context = await browser.newContext({ locale: 'en-US', bypassCSP: true });
    const page = await context.newPage();
    await signInByKeyboard(page);
    // No token or session secret reaches the page's storage.
    expect(await page.evaluate('JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage })')).toBe(
      '{}{}',
    );
    expect(await page.evaluate('document.cookie')).toBe('');
    await page.screenshot({ path: join(SCREENSHOTS, 'operator-overview.png'), fullPage: true });
    expect(await axeViolations(page)).toEqual([]);

    await page.getByRole('link', { name: /waiting for vetting/ }).click();
    await expect.poll(() => page.locator('h1').textContent()).toBe('Vetting queue');
    const entry = page.locator('section', { has: page.locator(`#order-${id}`) });
    expect(await entry.textContent()).toContain('Certdesk Test GmbH');
    expect(await entry.textContent()).toContain('www.certdesk-test.com');
    await page.screenshot({ path: join(SCREENSHOTS, 'operator-vetting.png'), fullPage: true });
    expect(await axeViolations(page)).toEqual([]);
    await entry.getByRole('button', { name: 'Approve and issue' }).click();
    await expect
      .poll(() => page.getByRole('status').textContent())
      .toBe(`Order ${id} was approved and left the queue.`);
    expect(await page.locator(`#order-${id}`).count()).toBe(0);
    await page.screenshot({ path: join(SCREENSHOTS, 'operator-vetting-approved.png'), fullPage: true });

    await work();
    expect(await status(id)).toMatchObject({ MajorStatus: 'COMPLETE', MinorStatus: 'COMPLETED' });
    const event = await t.db.kysely
      .selectFrom('audit_events')
      .select('actor')
      .where('action', '=', 'vetting.approved')
      .where('subject', '=', String(id))
      .executeTakeFirstOrThrow();
    expect(event.actor).toBe('operator:olga');
    await context.close();
  });

  it('ok/every operator screen: screenshot, no serious or critical axe-core violation, readable dates; German', async () => {
    await ovOrder();
    const context = await browser.newContext({ locale: 'en-US', bypassCSP: true });
    const page = await context.newPage();
    await signInByKeyboard(page);
    const screens: [string, string, string][] = [
      ['/operator/customers', 'Customers', 'operator-customers.png'],
      ['/operator/vetting', 'Vetting queue', 'operator-vetting-queue.png'],
      ['/operator/ca', 'CA status', 'operator-ca.png'],
      ['/operator/mail', 'Mail outbox', 'operator-mail.png'],
      ['/operator/jobs', 'Failed jobs', 'operator-jobs.png'],
      ['/operator/vetting?lang=de', 'Prüfwarteschlange', 'operator-vetting-de.png'],
      ['/operator/jobs?lang=de', 'Fehlgeschlagene Jobs', 'operator-jobs-de.png'],
    ];
    for (const [path, title, file] of screens) {
      const res = await page.goto(`${base}${path}`);
      expect(res?.status(), path).toBe(200);
      expect(res?.headers()['content-security-policy']).not.toContain('unsafe-inline');
      expect(await page.locator('h1').textContent()).toBe(title);
      await page.screenshot({ path: join(SCREENSHOTS, file), fullPage: true });
      expect(await axeViolations(page), path).toEqual([]);
    }
    await page.goto(`${base}/operator/jobs`);
    expect(await page.locator('main').textContent()).toContain('ECONNREFUSED');
    // Dates as people read them, with the machine form beside.
    expect(await page.locator('time').first().textContent()).toMatch(/^\d{1,2} \w{3} \d{4}, \d{2}:\d{2} UTC$/);
    await page.goto(`${base}/operator/ca?lang=de`);
    expect(await page.locator('main').textContent()).toMatch(/vor \d+ (Sekunden|Minuten)|jetzt/);
    // Retry the failed job with the keyboard: its button focused, Enter.
    await page.goto(`${base}/operator/jobs`);
    await page
      .getByRole('button', { name: /^Retry Job/ })
      .first()
      .focus();
    await Promise.all([page.waitForURL(/done=retried/), page.keyboard.press('Enter')]);
    expect(await page.getByRole('status').textContent()).toMatch(/is queued again/);
    await page.screenshot({ path: join(SCREENSHOTS, 'operator-jobs-retried.png'), fullPage: true });
    await context.close();
  });
});
