import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, type TestCustomer } from '../support/app.js';
import { testDialects } from '../support/databases.js';
import { testCsr } from '../support/csr.js';

describe.each(testDialects())('tool endpoints on $dialect', (dialect) => {
  let t: TestContext;
  let a: TestCustomer;
  let b: TestCustomer;
  beforeAll(async () => {
    t = await createTestContext(dialect, { CERTDESK_BLOCKED_NAMES: 'blocked-brand.com,paypal' });
    a = await t.customer({ name: 'A' });
    b = await t.customer({ name: 'B' });
  });
  afterAll(async () => t.close());

  const post = (token: string, url: string, payload: unknown) =>
    t.call(token, { method: 'POST', url, payload: payload as Record<string, unknown> });

  describe('POST /ValidateCSR', () => {
    it('ok/every ParsedCSR field of spec 2.5', async () => {
      const res = await post(a.token, '/rest/v1/ValidateCSR', { CSR: testCsr().pem });
      expect(res.statusCode).toBe(200);
      const p = res.json().ParsedCSR;
      const dir = mkdtempSync(join(tmpdir(), 'vcsr-'));
      writeFileSync(join(dir, 'csr.pem'), testCsr().pem);
      const der = execFileSync('openssl', ['req', '-in', join(dir, 'csr.pem'), '-outform', 'DER']);
      const digest = (alg: string) =>
        execFileSync('openssl', ['dgst', `-${alg}`, '-r'], { input: der })
          .toString()
          .split(' ')[0]!
          .toUpperCase();
      expect(p).toEqual({
        CommonName: 'www.certdesk-test.com',
        Organization: 'Certdesk Test',
        OrganizationUnit: '',
        Locality: 'Berlin',
        State: 'Berlin',
        Country: 'DE',
        Email: '',
        SignaturAlgorithm: 'sha256WithRSAEncryption',
        KeyEncryptionAlgorithm: 'RSA',
        KeyLength: 2048,
        HashMD5: digest('md5'),
        HashSHA256: digest('sha256'),
        UniqueValue: expect.stringMatching(/^[A-Za-z0-9]{20}$/),
      });
    });

    it('ok/UniqueValue is stable for the caller and differs between customers', async () => {
      const first = (await post(a.token, '/rest/v1/ValidateCSR', { CSR: testCsr().pem })).json().ParsedCSR.UniqueValue;
      const again = (await post(a.token, '/rest/v1/ValidateCSR', { CSR: testCsr().pem })).json().ParsedCSR.UniqueValue;
      const other = (await post(b.token, '/rest/v1/ValidateCSR', { CSR: testCsr().pem })).json().ParsedCSR.UniqueValue;
      expect(again).toBe(first);
      expect(other).not.toBe(first);
    });

    it.each([
      ['fail/garbage', { CSR: 'hello' }, 'CSR'],
      ['fail/truncated', { CSR: testCsr().pem.slice(0, 300) }, 'CSR'],
      ['fail/tampered signature', { CSR: tamper(testCsr().pem) }, 'CSR'],
      ['fail/missing CSR', {}, 'CSR'],
      ['fail/CSR not a string', { CSR: 42 }, 'CSR'],
    ])('%s → 417 with ErrorField', async (_name, body, field) => {
      const res = await post(a.token, '/rest/v1/ValidateCSR', body);
      expect(res.statusCode).toBe(417);
      expect(res.json()).toMatchObject({ success: false, ErrorField: field });
    });

    it('fail/a token with only the read scope → 403', async () => {
      const token = await t.token(a, 'read quote');
      expect((await post(token, '/rest/v1/ValidateCSR', { CSR: testCsr().pem })).statusCode).toBe(403);
    });
  });

  describe('POST /ValidateName', () => {
    it.each([
      ['ok/a registrable name', 'www.certdesk-test.com', true],
      ['ok/a blocked reserved name', 'www.example.com', false],
      ['ok/a name on the configured block list', 'shop.blocked-brand.com', false],
      ['ok/a bare blocked label', 'paypal.certdesk-test.com', false],
      ['ok/a public suffix alone', 'co.uk', false],
      ['ok/an internal name', 'intranet.corp', false],
    ])('%s', async (_name, name, qualified) => {
      const res = await post(a.token, '/rest/v1/ValidateName', { CommonName: name });
      expect(res.statusCode).toBe(200);
      expect(res.json().IsQualified).toBe(qualified);
      expect(res.json()).not.toHaveProperty('PrivateKey');
    });

    it('ok/GeneratePrivateKey returns a key and a CSR that openssl accepts, never stored', async () => {
      const res = await post(a.token, '/rest/v1/ValidateName', {
        CommonName: 'shop.certdesk-test.com',
        GeneratePrivateKey: 'True',
      });
      const body = res.json();
      expect(body.IsQualified).toBe(true);
      expect(body.PrivateKey).toMatch(/^-----BEGIN PRIVATE KEY-----\n[\s\S]+\n$/);
      const dir = mkdtempSync(join(tmpdir(), 'gen-'));
      writeFileSync(join(dir, 'csr.pem'), body.CSR);
      writeFileSync(join(dir, 'key.pem'), body.PrivateKey);
      execFileSync('openssl', ['req', '-in', join(dir, 'csr.pem'), '-verify', '-noout'], { stdio: 'pipe' });
      const csrKey = execFileSync('openssl', ['req', '-in', join(dir, 'csr.pem'), '-noout', '-pubkey']).toString();
      const privKey = execFileSync('openssl', ['pkey', '-in', join(dir, 'key.pem'), '-pubout']).toString();
      expect(csrKey).toBe(privKey);
      expect(res.headers['cache-control']).toBe('no-store');
      const stored = await t.db.kysely.selectFrom('audit_events').select('details').execute();
      expect(JSON.stringify(stored)).not.toContain('PRIVATE KEY');
    });

    it.each([
      ['fail/not a host name', { CommonName: 'not a name!' }],
      ['fail/missing CommonName', {}],
      ['fail/IP literal', { CommonName: '10.0.0.1' }],
    ])('%s → 417', async (_name, body) => {
      const res = await post(a.token, '/rest/v1/ValidateName', body);
      expect(res.statusCode).toBe(417);
      expect(res.json()).toMatchObject({ success: false, ErrorField: 'CommonName' });
    });

    it('fail/GeneratePrivateKey spelled yes → 417 with its field', async () => {
      const res = await post(a.token, '/rest/v1/ValidateName', {
        CommonName: 'www.certdesk-test.com',
        GeneratePrivateKey: 'yes',
      });
      expect(res.statusCode).toBe(417);
      expect(res.json().ErrorField).toBe('GeneratePrivateKey');
    });
  });

  describe('GET /BaseDomain/{FQDN}', () => {
    it.each([
      ['www.shop.example.co.uk', 'example.co.uk'],
      ['WWW.Certdesk-Test.com.', 'certdesk-test.com'],
      ['*.certdesk-test.com', 'certdesk-test.com'],
    ])('ok/%s → %s, without a success member', async (fqdn, domain) => {
      const res = await t.call(a.token, { method: 'GET', url: `/rest/v1/BaseDomain/${encodeURIComponent(fqdn)}` });
      expect(res.statusCode).toBe(200);
      expect(res.json().domain).toBe(domain);
      expect(res.json()).not.toHaveProperty('success');
    });
    it('ok/a 200-character name is not cut by the router', async () => {
      const long = `${'a'.repeat(60)}.${'b'.repeat(60)}.${'c'.repeat(60)}.certdesk-test.com`;
      const res = await t.call(a.token, { method: 'GET', url: `/rest/v1/BaseDomain/${long}` });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ fqdn: long, domain: 'certdesk-test.com' });
    });
    it('fail/broken percent-encoding in the path → 417 envelope', async () => {
      const res = await t.call(a.token, { method: 'GET', url: '/rest/v1/BaseDomain/%E0%A4%A' });
      expect(res.statusCode).toBe(417);
      expect(res.json()).toMatchObject({ success: false, ErrorId: -1000 });
    });
    it('fail/no registrable domain → 417', async () => {
      const res = await t.call(a.token, { method: 'GET', url: '/rest/v1/BaseDomain/co.uk' });
      expect(res.statusCode).toBe(417);
      expect(res.json().ErrorField).toBe('FQDN');
    });
    it('fail/without a token → 401', async () => {
      expect((await t.app.inject({ method: 'GET', url: '/rest/v1/BaseDomain/example.org' })).statusCode).toBe(401);
    });
  });
});

/** Flips one byte of the signature at the end of the DER. */
function tamper(pem: string): string {
  const b64 = pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, '');
  const der = Buffer.from(b64, 'base64');
  der[der.length - 10] = der[der.length - 10]! ^ 0x01;
  return `-----BEGIN CERTIFICATE REQUEST-----\n${der
    .toString('base64')
    .match(/.{1,64}/g)!
    .join('\n')}\n-----END CERTIFICATE REQUEST-----\n`;
}
