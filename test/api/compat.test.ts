import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyAliases } from '../../src/web/compat.js';
import { createTestContext, type TestContext, type TestCustomer } from '../support/app.js';
import { testDialects } from '../support/databases.js';
import { testCsr } from '../support/csr.js';

/** Each quirk of DESIGN §5.2 that real clients of the original service send, as they send it. */
describe.each(testDialects())('compatibility quirks on $dialect', (dialect) => {
  let t: TestContext;
  let c: TestCustomer;
  beforeAll(async () => {
    t = await createTestContext(dialect);
    c = await t.customer();
  });
  afterAll(async () => t.close());

  const quote = '/rest/v1/Quote?ProductCode=TrustPoint.DV&ValidityPeriod=12&ServerCount=1&SubjectAltNameCount=0';

  it('ok/a {} body on GET labelled form-urlencoded is ignored; parameters come from the query', async () => {
    const res = await t.call(c.token, {
      method: 'GET',
      url: quote,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: '{}',
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().OrderParameters.ValidityPeriod).toBe(12);
  });

  it('ok/a JSON body on GET is ignored', async () => {
    const res = await t.call(c.token, {
      method: 'GET',
      url: '/rest/v1/Profile',
      headers: { 'content-type': 'application/json' },
      payload: '{"ProductCode":"x"}',
    });
    expect(res.statusCode).toBe(200);
  });

  it('ok/a bare ? after the path', async () => {
    expect((await t.call(c.token, { method: 'GET', url: '/rest/v1/Profile?' })).statusCode).toBe(200);
    expect((await t.call(c.token, { method: 'GET', url: '/rest/v1/Products?' })).json().success).toBe(true);
  });

  it.each(['true', 'True', 'TRUE', '1'])('ok/boolean spelled %s', async (spelling) => {
    const on = (await t.call(c.token, { method: 'GET', url: `${quote}&InstallationService=${spelling}` })).json();
    const off = (
      await t.call(c.token, { method: 'GET', url: `${quote}&InstallationService=${spelling === '1' ? '0' : 'False'}` })
    ).json();
    expect(on.success).toBe(true);
    expect(on.Price).toBeGreaterThan(off.Price);
  });

  it('fail/a boolean spelled yes is refused with its field', async () => {
    const res = await t.call(c.token, { method: 'GET', url: `${quote}&InstallationService=yes` });
    expect(res.statusCode).toBe(417);
    expect(res.json().ErrorField).toBe('InstallationService');
  });

  it('ok/Content-Type: application/json; charset=utf8 (not a valid charset name)', async () => {
    const res = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/ValidateCSR',
      headers: { 'content-type': 'application/json; charset=utf8' },
      payload: JSON.stringify({ CSR: testCsr().pem }),
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().ParsedCSR.CommonName).toBe(testCsr().commonName);
  });

  it('ok/a CSR pasted verbatim: raw line breaks inside a JSON string', async () => {
    const payload = `{"CSR":"${testCsr().pem}"}`;
    expect(payload).toContain('\n');
    const res = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/ValidateCSR',
      headers: { 'content-type': 'application/json' },
      payload,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().ParsedCSR.CommonName).toBe(testCsr().commonName);
  });

  it('ok/\\/ escapes in JSON strings', async () => {
    const payload = JSON.stringify({ CSR: testCsr().pem }).replaceAll('/', '\\/');
    expect(payload).toContain('\\/');
    const res = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/ValidateCSR',
      headers: { 'content-type': 'application/json' },
      payload,
    });
    expect(res.statusCode).toBe(200);
  });

  it('ok/a JSON body labelled form-urlencoded on POST is read as JSON', async () => {
    const res = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/ValidateName',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: JSON.stringify({ CommonName: 'www.certdesk-test.com' }),
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ success: true, IsQualified: true });
  });

  it('ok/the token endpoint takes form and JSON bodies', async () => {
    const form = await t.app.inject({
      method: 'POST',
      url: '/oauth2/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: `grant_type=client_credentials&client_id=${c.clientId}&client_secret=${c.clientSecret}`,
    });
    const json = await t.app.inject({
      method: 'POST',
      url: '/oauth2/token',
      headers: { 'content-type': 'application/json; charset=utf8' },
      payload: JSON.stringify({
        grant_type: 'client_credentials',
        client_id: c.clientId,
        client_secret: c.clientSecret,
      }),
    });
    expect([form.statusCode, json.statusCode]).toEqual([200, 200]);
  });

  it('ok/CertCenterOrderID is an alias of ServiceOrderID in bodies and queries', () => {
    const body: Record<string, unknown> = { CertCenterOrderID: 42 };
    applyAliases(body);
    expect(body.ServiceOrderID).toBe(42);
    const both: Record<string, unknown> = { CertCenterOrderID: 1, ServiceOrderID: 2 };
    applyAliases(both);
    expect(both.ServiceOrderID).toBe(2);
  });

  it('ok/misspelled paths of the original service reach their canonical routes', async () => {
    const window = 'FromDate=2026-01-01T00:00:00Z&ToDate=2027-01-01T00:00:00Z';
    const res = await t.call(c.token, { method: 'GET', url: `/rest/v1/GetModifiedOrders?${window}` });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(
      (await t.call(c.token, { method: 'GET', url: `/rest/v1/ModifiedOrders?${window}` })).json(),
    );
    expect(res.json()).toEqual({ success: true, OrderInfos: [] });
  });

  it('ok/responses keep the spec’s spellings', async () => {
    const profile = (await t.call(c.token, { method: 'GET', url: '/rest/v1/Profile' })).json();
    expect(profile).toHaveProperty('OAuth2_Token');
    const parsed = (
      await t.call(c.token, { method: 'POST', url: '/rest/v1/ValidateCSR', payload: { CSR: testCsr().pem } })
    ).json();
    expect(parsed.ParsedCSR).toHaveProperty('SignaturAlgorithm');
  });
});
