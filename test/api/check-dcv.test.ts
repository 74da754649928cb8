// certdesk's additions for the web interface, as any client sees them: POST /CheckDCV/{id}
// ("check now"), GET /Orders?ExpiresWithinDays= with OrderBy=EndDate, and GET /Order showing the
// whole proof while an order waits for it. Both databases; ok, fail, bad input, another customer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestCustomer } from '../support/app.js';
import { testDialects } from '../support/databases.js';
import { dnsOrderBody, issuingContext, type IssuingContext } from '../support/issuing-context.js';
import { testCsr } from '../support/csr.js';

describe.each(testDialects())('check now and expiring orders on $dialect', (dialect) => {
  let s: IssuingContext;
  let other: TestCustomer;
  let w: TestCustomer;

  beforeAll(async () => {
    s = await issuingContext(dialect, 'Checker');
    other = await s.t.customer({ name: 'Other' });
    // Its orders wait: the record in place is the first customer's (DCV values are per customer).
    w = await s.t.customer({ name: 'Waiter', creditLimit: 100000 });
  }, 60_000);
  afterAll(async () => s?.close());

  const call = (token: string, method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>) =>
    s.t.call(token, { method, url: `/rest/v1${url}`, ...(payload === undefined ? {} : { payload }) });

  const valueOf = async (c: TestCustomer) =>
    (await call(c.token, 'POST', '/DNSData', { CSR: testCsr().pem, ProductCode: 'TrustPoint.DV' })).json()
      .DNSAuthDetails.DNSValue as string;
  /** Only the first customer's record in place. */
  const onlyFirst = async () => s.dns.set('certdesk-test.com', [{ type: 'TXT', data: await valueOf(s.c) }]);
  /** The waiting customer's record published beside it. */
  const publish = async (value: string) =>
    s.dns.set('certdesk-test.com', [
      { type: 'TXT', data: await valueOf(s.c) },
      { type: 'TXT', data: value },
    ]);

  /** A DNS order of the waiting customer, its record not published yet. */
  const waiting = async () => {
    await onlyFirst();
    const res = await call(w.token, 'POST', '/Order', dnsOrderBody());
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as {
      ServiceOrderID: number;
      OrderParameters: { DNSAuthDetails: { DNSEntry: string; DNSValue: string } };
    };
  };

  it('ok/GET /Order shows the record to publish while the order waits; check now records each name, then issues once it is there', async () => {
    const placed = await waiting();
    const id = placed.ServiceOrderID;
    const shown = (await call(w.token, 'GET', `/Order/${id}?includeOrderParameters=true`)).json().OrderInfo
      .OrderParameters.DNSAuthDetails;
    expect(shown).toMatchObject({
      PointerType: 'TXT',
      DNSEntry: placed.OrderParameters.DNSAuthDetails.DNSEntry,
      DNSValue: placed.OrderParameters.DNSAuthDetails.DNSValue,
    });
    const first = await call(w.token, 'POST', `/CheckDCV/${id}`);
    expect(first.statusCode).toBe(200);
    const dcv = (await call(w.token, 'GET', `/Order/${id}?includeDCVStatus=true`)).json().OrderInfo.DCVStatus;
    expect(dcv[0]).toMatchObject({ Status: 'PENDING' });
    expect(dcv[0].LastCheck).toBeDefined();
    expect(dcv[0].Problem).toBeDefined();
    expect(shown.DNSEntry).toBe('certdesk-test.com');
    await publish(shown.DNSValue);
    expect((await call(w.token, 'POST', `/CheckDCV/${id}`)).statusCode).toBe(200);
    const after = (await call(w.token, 'GET', `/Order/${id}`)).json().OrderInfo;
    expect(after.OrderStatus.MajorStatus).toBe('COMPLETE');
    // An order that waits for nothing is left as it is.
    expect((await call(w.token, 'POST', `/CheckDCV/${id}`)).statusCode).toBe(200);
  });

  it('ok/check now when the CAA lookup fails (SERVFAIL): 200, the proof recorded, the order left to its job (was a 500)', async () => {
    const placed = await waiting();
    const id = placed.ServiceOrderID;
    await publish(placed.OrderParameters.DNSAuthDetails.DNSValue);
    s.dns.servfail('certdesk-test.com', 'CAA');
    s.dns.servfail('www.certdesk-test.com', 'CAA');
    try {
      expect((await call(w.token, 'POST', `/CheckDCV/${id}`)).statusCode).toBe(200);
      const info = (await call(w.token, 'GET', `/Order/${id}?includeDCVStatus=true`)).json().OrderInfo;
      expect(info.OrderStatus).toMatchObject({ MajorStatus: 'PENDING', MinorStatus: 'WF_ISSUANCE' });
      expect(info.DCVStatus.every((n: { Status: string }) => n.Status === 'VALIDATED')).toBe(true);
    } finally {
      s.dns.servfail('certdesk-test.com', 'CAA', false);
      s.dns.servfail('www.certdesk-test.com', 'CAA', false);
    }
    // The order's job, once CAA answers again, issues it.
    const job = (
      await s.t.db.kysely
        .selectFrom('jobs')
        .select('id')
        .where('unique_key', '=', `order:${id}`)
        .executeTakeFirstOrThrow()
    ).id;
    await s.t.services.orderFlow.validate({ orderId: id }, { id: job as never });
    expect((await call(w.token, 'GET', `/Order/${id}`)).json().OrderInfo.OrderStatus.MajorStatus).toBe('COMPLETE');
  });

  it('ok/two checks at once issue one certificate', async () => {
    const placed = await waiting();
    const id = placed.ServiceOrderID;
    await publish(placed.OrderParameters.DNSAuthDetails.DNSValue);
    const answers = await Promise.all(Array.from({ length: 4 }, () => call(w.token, 'POST', `/CheckDCV/${id}`)));
    expect(answers.map((a) => a.statusCode)).toEqual([200, 200, 200, 200]);
    const certificates = await s.t.db.kysely
      .selectFrom('certificates')
      .select('id')
      .where('order_id', '=', id)
      .execute();
    expect(certificates).toHaveLength(1);
  });

  it("fail/bad input is 417 (the API's invalid input); another customer's order is 404 and unchanged; a reader may not check", async () => {
    expect((await call(w.token, 'POST', '/CheckDCV/abc')).statusCode).toBe(417);
    const placed = await waiting();
    const theirs = await call(other.token, 'POST', `/CheckDCV/${placed.ServiceOrderID}`);
    expect(theirs.statusCode).toBe(404);
    const dcv = (await call(w.token, 'GET', `/Order/${placed.ServiceOrderID}?includeDCVStatus=true`)).json().OrderInfo
      .DCVStatus;
    expect(dcv[0].LastCheck).toBeUndefined();
    const reader = await s.t.call(w.token, {
      method: 'POST',
      url: '/rest/v1/Application',
      payload: { Name: 'reader', Scopes: ['read'] },
    });
    const { ClientId, ClientSecret } = reader.json();
    const token = (
      await s.t.services.oauth.token(
        { grantType: 'client_credentials', clientId: ClientId, clientSecret: ClientSecret },
        null,
      )
    ).access_token;
    expect((await call(token, 'POST', `/CheckDCV/${placed.ServiceOrderID}`)).statusCode).toBe(403);
  });

  it('ok/ExpiresWithinDays finds issued orders ending in the window, soonest first; fail/bad values are 417; another customer sees none', async () => {
    await onlyFirst();
    const issued = await call(s.c.token, 'POST', '/Order', dnsOrderBody());
    expect(issued.statusCode, issued.body).toBe(200);
    const id = issued.json().ServiceOrderID as number;
    const within = (days: number, token = s.c.token) =>
      call(token, 'GET', `/Orders?ExpiresWithinDays=${days}&OrderBy=EndDate&OrderDir=ASC&ItemsPerPage=100`);
    const inYear = (await within(400)).json().OrderInfos.map((o: { ServiceOrderID: number }) => o.ServiceOrderID);
    expect(inYear).toContain(id);
    const ends = (await within(400))
      .json()
      .OrderInfos.map((o: { OrderStatus: { EndDate: string } }) => o.OrderStatus.EndDate);
    expect([...ends].sort()).toEqual(ends);
    expect((await within(30)).json().OrderInfos.map((o: { ServiceOrderID: number }) => o.ServiceOrderID)).not.toContain(
      id,
    );
    expect((await call(s.c.token, 'GET', '/Orders?ExpiresWithinDays=0')).statusCode).toBe(417);
    expect((await call(s.c.token, 'GET', '/Orders?ExpiresWithinDays=soon')).statusCode).toBe(417);
    expect((await within(400, other.token)).json().OrderInfos).toEqual([]);
  });
});
