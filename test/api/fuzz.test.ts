import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, type TestCustomer } from '../support/app.js';
import { testDialects } from '../support/databases.js';
import { testCsr } from '../support/csr.js';

/** A small seeded PRNG (mulberry32) so that a failing case can be replayed. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let x = s;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const SEED = 20261121;

// Fuzzing exercises the request parsers, not the database: SQLite only.
const [sqlite] = testDialects();

describe('fuzzed requests never produce a 500', () => {
  let t: TestContext;
  let c: TestCustomer;
  beforeAll(async () => {
    t = await createTestContext(sqlite!, { CERTDESK_RATE_LIMIT: '1000000' });
    c = await t.customer();
  });
  afterAll(async () => t.close());

  it('2,000 random and truncated CSRs → 417 with ErrorField CSR (or 200 when still valid)', async () => {
    const rand = rng(SEED);
    const pem = testCsr().pem;
    const der = Buffer.from(pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
    const wrap = (bytes: Buffer) =>
      `-----BEGIN CERTIFICATE REQUEST-----\n${bytes.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`;
    const counts = { ok: 0, refused: 0 };
    for (let i = 0; i < 2000; i++) {
      let csr: string;
      switch (i % 5) {
        case 0:
          csr = pem.slice(0, Math.floor(rand() * pem.length));
          break;
        case 1:
          csr = wrap(der.subarray(0, Math.floor(rand() * der.length)));
          break;
        case 2: {
          const copy = Buffer.from(der);
          const at = Math.floor(rand() * copy.length);
          copy[at] = copy[at]! ^ (1 + Math.floor(rand() * 255));
          csr = wrap(copy);
          break;
        }
        case 3:
          csr = wrap(randomBytes(1 + Math.floor(rand() * 600)));
          break;
        default:
          csr = randomBytes(1 + Math.floor(rand() * 300)).toString('latin1');
      }
      const res = await t.call(c.token, { method: 'POST', url: '/rest/v1/ValidateCSR', payload: { CSR: csr } });
      if (res.statusCode === 200) {
        counts.ok++;
        continue;
      }
      expect.soft(res.statusCode, `case ${i}`).toBe(417);
      expect.soft(res.json().ErrorField, `case ${i}`).toBe('CSR');
      counts.refused++;
    }
    expect(counts.refused).toBeGreaterThan(1900);
  });

  it('2,000 malformed request bodies → a 4xx envelope, never a 5xx', async () => {
    const rand = rng(SEED + 1);
    const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)]!;
    const targets = [
      ['POST', '/rest/v1/ValidateCSR'],
      ['POST', '/rest/v1/ValidateName'],
      ['POST', '/oauth2/token'],
      ['POST', '/oauth2/revoke'],
      ['GET', '/rest/v1/Quote'],
      ['GET', '/rest/v1/ProductDetails'],
      ['GET', '/rest/v1/Profile'],
    ] as const;
    const types = [
      'application/json',
      'application/json; charset=utf8',
      'application/x-www-form-urlencoded',
      'text/plain',
      'application/xml',
      '',
    ];
    const values = [
      null,
      true,
      0,
      -1,
      1e308,
      'x'.repeat(5000),
      [],
      {},
      [[[[[]]]]],
      '\u0000',
      'True',
      '💥',
      { CSR: {} },
    ];
    const shapes: (() => string)[] = [
      () => randomBytes(Math.floor(rand() * 200)).toString('latin1'),
      () =>
        JSON.stringify({ CSR: pick(values), CommonName: pick(values), GeneratePrivateKey: pick(values) }).slice(
          0,
          Math.floor(rand() * 80),
        ),
      () =>
        JSON.stringify({ CSR: pick(values), CommonName: pick(values), grant_type: pick(values), token: pick(values) }),
      () => JSON.stringify(pick(values)),
      () => '{'.repeat(Math.floor(rand() * 5000)),
      () => `grant_type=${encodeURIComponent(String(pick(values)))}&client_id[]=1&client_secret=%ZZ`,
      () => `{"CSR":"${'\\u'.repeat(1 + Math.floor(rand() * 3))}"}`,
    ];
    const queries = [
      '',
      '?ProductCode=',
      '?ProductCode=TrustPoint.DV&ValidityPeriod=1e999',
      '?ValidityPeriod=12&ValidityPeriod=24&ProductCode=a&ProductCode=b',
      '?%ZZ=1',
      '?ProductCode=TrustPoint.DV&ValidityPeriod=12&ServerCount=99999999999',
    ];
    const statuses = new Map<number, number>();
    for (let i = 0; i < 2000; i++) {
      const [method, url] = pick(targets);
      const type = pick(types);
      const res = await t.call(c.token, {
        method,
        url: url + pick(queries),
        payload: pick(shapes)(),
        headers: type === '' ? {} : { 'content-type': type },
      });
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      expect.soft(res.statusCode, `case ${i}: ${method} ${url}`).toBeLessThan(500);
      expect.soft(res.headers['content-length'], `case ${i}`).toBeDefined();
      const body = res.json();
      if (res.statusCode >= 400 && !url.startsWith('/oauth2')) {
        expect.soft(body.success, `case ${i}`).toBe(false);
        expect.soft(typeof body.Message, `case ${i}`).toBe('string');
        expect.soft(Number.isInteger(body.ErrorId), `case ${i}`).toBe(true);
      }
    }
    expect([...statuses.keys()].every((s) => s < 500)).toBe(true);
  });

  it('a body over the limit → 413 with the envelope', async () => {
    const res = await t.call(c.token, {
      method: 'POST',
      url: '/rest/v1/ValidateCSR',
      payload: JSON.stringify({ CSR: 'A'.repeat(1_100_000) }),
      headers: { 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toMatchObject({ success: false, ErrorId: -1413 });
  });
});
