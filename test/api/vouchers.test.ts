// Vouchers (spec §2.13, §3.2, §4.28–4.34; DESIGN §5.8): made, listed and voided by their owner;
// looked at, redeemed and collected anonymously with the code. The price is reserved when a voucher
// is made and charged once when it is redeemed; redemption is exactly-once.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { caKeyFile, createServices, createWebApp } from '../../src/main.js';
import { customerId, userId, type Role } from '../../src/core/index.js';
import { VOUCHER_CODE_BITS, normalizeVoucherCode } from '../../src/ra/vouchers/voucher-codes.js';
import { keyOf } from '../../src/ra/vouchers/code-guessing.js';
import type { TestCustomer } from '../support/app.js';
import { testCsr } from '../support/csr.js';
import { testDialects } from '../support/databases.js';
import { ORDER_CONTACT, dnsOrderBody, issuingContext, type IssuingContext } from '../support/issuing-context.js';
import { verifyDelivered } from '../support/openssl-checks.js';

const CODE = /^[2-9A-HJKMNP-TV-Z]{4}(-[2-9A-HJKMNP-TV-Z]{4}){5}$/;

describe.each(testDialects())('vouchers on $dialect', (dialect) => {
  let ctx: IssuingContext;
  let a: TestCustomer;
  let b: TestCustomer;
  let address = 0;
  beforeAll(async () => {
    ctx = await issuingContext(dialect, 'Voucher seller');
    a = ctx.c;
    b = await ctx.t.customer({ name: 'Other seller', creditLimit: 100000 });
  });
  afterAll(async () => ctx.close());

  /** A client address of its own for each anonymous caller: the guessing limit is per address. */
  const newAddress = () => `198.51.100.${++address % 250}`;
  const call = (
    token: string | undefined,
    method: 'GET' | 'POST' | 'DELETE',
    url: string,
    payload?: unknown,
    ip?: string,
  ) =>
    ctx.t.call(token, {
      method,
      url: `/rest/v1${url}`,
      ...(payload === undefined ? {} : { payload: payload as object }),
      ...(ip === undefined ? {} : { remoteAddress: ip }),
    });
  const terms = (over: Record<string, unknown> = {}) => ({
    OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, ...over },
  });
  const make = async (c: TestCustomer, over: Record<string, unknown> = {}) => {
    const res = await call(c.token, 'POST', '/Voucher', terms(over));
    expect(res.statusCode, res.body).toBe(200);
    return res.json().VoucherCode as string;
  };
  const used = async (c: TestCustomer) => (await call(c.token, 'GET', '/Limit')).json().LimitInfo.Used as number;
  const redeemBody = (code: string, params: Record<string, unknown> = {}) => ({
    VoucherCode: code,
    ...dnsOrderBody(params),
  });
  const redeem = (code: string, params: Record<string, unknown> = {}, ip = newAddress()) =>
    call(undefined, 'POST', '/Redeem', redeemBody(code, params), ip);
  const charges = async (c: TestCustomer) =>
    (
      await ctx.t.db.kysely
        .selectFrom('ledger')
        .select(['order_id', 'amount_minor'])
        .where('customer_id', '=', c.customerId)
        .where('kind', '=', 'charge')
        .execute()
    ).map((r) => ({ orderId: Number(r.order_id), amount: Number(r.amount_minor) }));
  const ordersOf = async (c: TestCustomer) =>
    (await call(c.token, 'GET', '/Orders?includeOrderParameters=true')).json().OrderInfos as {
      ServiceOrderID: number;
      OrderParameters: { PartnerOrderID: string };
    }[];
  /** A token of a new user of `c` with `roles` (every scope on its application). */
  async function memberToken(c: TestCustomer, roles: Role[], scope?: string) {
    const created = await call(c.token, 'POST', '/User', {
      FullName: 'Vera Voucher',
      Email: 'vera@customer.example',
      Username: `vera-${Math.random().toString(36).slice(2, 10)}`,
      Password: 'Saturn-vanilla-42-drift',
      Roles: roles,
    });
    expect(created.statusCode, created.body).toBe(200);
    const { application, clientSecret } = await ctx.t.services.accounts.createApplication({
      customerId: customerId(c.customerId),
      userId: userId(created.json().Id as number),
      scopes: ['profile', 'limit', 'read', 'quote', 'order', 'voucher', 'write'],
    });
    return ctx.t.token({ clientId: application.clientId, clientSecret }, scope);
  }

  describe('codes', () => {
    it('ok/carry at least 100 random bits, grouped for reading aloud, read back in any case and spacing', async () => {
      expect(VOUCHER_CODE_BITS).toBeGreaterThanOrEqual(100);
      const codes = await Promise.all(Array.from({ length: 20 }, () => make(a)));
      for (const code of codes) expect(code).toMatch(CODE);
      expect(new Set(codes).size).toBe(20);
      const code = codes[0]!;
      expect(normalizeVoucherCode(code.toLowerCase().replace(/-/g, ' '))).toBe(code);
      expect(normalizeVoucherCode(code.replace(/-/g, ''))).toBe(code);
      for (const bad of ['', code.slice(1), `${code}X`, code.replace(/^./, 'O'), code.replace(/^./, '1'), 42, null])
        expect(normalizeVoucherCode(bad)).toBeUndefined();
      // Looked up in any case, with or without dashes.
      const res = await call(a.token, 'GET', `/Voucher/${code.toLowerCase().replace(/-/g, '')}`);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().Vouchers[0].VoucherCode).toBe(code);
    });

    it('ok/is stored only hashed and sealed: the database holds no code', async () => {
      const code = await make(a);
      const rows = await ctx.t.db.kysely.selectFrom('vouchers').selectAll().execute();
      const text = JSON.stringify(rows);
      expect(text).not.toContain(code);
      expect(text).not.toContain(code.replace(/-/g, ''));
    });

    it('ok/an IPv6 client is counted by its /64, an IPv4-mapped one as IPv4', () => {
      expect(keyOf('2001:db8:1:2:aaaa::1')).toBe(keyOf('2001:db8:1:2:bbbb:cccc:dddd:eeee'));
      expect(keyOf('2001:db8:1:2::1')).not.toBe(keyOf('2001:db8:1:3::1'));
      expect(keyOf('::ffff:192.0.2.7')).toBe(keyOf('192.0.2.7'));
    });
  });

  describe('POST /Voucher', () => {
    it('ok/prices like /Quote and reserves the price: Used rises at once, nothing is charged', async () => {
      const before = await used(a);
      const quote = (
        await call(
          a.token,
          'GET',
          '/Quote?ProductCode=TrustPoint.DVMultiDomain&ValidityPeriod=24&SubjectAltNameCount=6',
        )
      ).json().Price as number;
      const res = await call(a.token, 'POST', '/Voucher', {
        OrderParameters: {
          ProductCode: 'TrustPoint.DVMultiDomain',
          ValidityPeriod: 24,
          SubjectAltNameCount: 6,
          PartnerOrderID: 'shop-4711',
        },
      });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toEqual({
        success: true,
        VoucherCode: expect.stringMatching(CODE),
        OrderParameters: {
          ProductCode: 'TrustPoint.DVMultiDomain',
          ServerCount: 1,
          SubjectAltNameCount: 6,
          ValidityPeriod: 24,
          Price: quote,
          Currency: 'EUR',
          PartnerOrderID: 'shop-4711',
        },
      });
      expect(await used(a)).toBeCloseTo(before + quote, 2);
      expect((await charges(a)).length).toBe((await ordersOf(a)).length);
      const audit = await ctx.t.db.kysely
        .selectFrom('audit_events')
        .selectAll()
        .where('action', '=', 'voucher.created')
        .where('customer_id', '=', a.customerId)
        .execute();
      expect(audit.length).toBeGreaterThan(0);
      expect(audit.at(-1)!.actor).toMatch(/^(user|app):/);
    });

    it('ok/a PartnerOrderID is generated when omitted; a retry with the same one and terms returns the first voucher', async () => {
      const generated = (await call(a.token, 'POST', '/Voucher', terms())).json().OrderParameters.PartnerOrderID;
      expect(generated).toMatch(/^cd-[a-z0-9]{20}$/);
      const before = await used(a);
      const first = await call(a.token, 'POST', '/Voucher', terms({ PartnerOrderID: 'retry-1' }));
      const again = await call(a.token, 'POST', '/Voucher', terms({ PartnerOrderID: 'retry-1' }));
      expect(again.statusCode, again.body).toBe(200);
      expect(again.json().VoucherCode).toBe(first.json().VoucherCode);
      expect(await used(a)).toBeCloseTo(before + 49, 2);
      // Other terms under that PartnerOrderID, or a POST /Order taking it: refused.
      const other = await call(a.token, 'POST', '/Voucher', terms({ PartnerOrderID: 'retry-1', ValidityPeriod: 24 }));
      expect(other.statusCode).toBe(409);
      expect(other.json().ErrorField).toBe('PartnerOrderID');
      const order = await call(a.token, 'POST', '/Order', dnsOrderBody({ PartnerOrderID: 'retry-1' }));
      expect(order.statusCode).toBe(409);
      expect(order.json().Message).toMatch(/voucher/);
      expect(await used(a)).toBeCloseTo(before + 49, 2);
    });

    it('ok/a voucher and an order racing for one PartnerOrderID: exactly one gets it (ten rounds)', async () => {
      for (let round = 0; round < 10; round++) {
        const partnerOrderId = `race-${round}-${Math.random().toString(36).slice(2, 8)}`;
        const [voucher, order] = await Promise.all([
          call(a.token, 'POST', '/Voucher', terms({ PartnerOrderID: partnerOrderId })),
          call(a.token, 'POST', '/Order', dnsOrderBody({ PartnerOrderID: partnerOrderId })),
        ]);
        expect([voucher.statusCode, order.statusCode].sort(), `${voucher.body} ${order.body}`).toEqual([200, 409]);
      }
    });

    it('fail/an unknown product, a product that is no TLS certificate, a bad term or too little credit: a clear error, nothing reserved', async () => {
      const before = await used(a);
      const count = (await call(a.token, 'GET', '/Vouchers')).json().Vouchers.length;
      const cases: [unknown, number, string][] = [
        [terms({ ProductCode: 'Nope.DV' }), 417, 'ProductCode'],
        [terms({ ProductCode: 'TrustPoint.CodeSigning' }), 417, 'ProductCode'],
        [terms({ ValidityPeriod: 36 }), 417, 'ValidityPeriod'],
        [terms({ SubjectAltNameCount: 3 }), 417, 'SubjectAltNameCount'],
        [terms({ ProductCode: 'TrustPoint.OVServer', ServerCount: '' }), 417, 'ServerCount'],
        [terms({ ProductCode: 'TrustPoint.EV', ValidityPeriod: 24, ServerCount: 1 }), 200, ''],
      ];
      const poor = await ctx.t.customer({ name: 'Poor', creditLimit: 50 });
      for (const [body, status, field] of cases) {
        const res = await call(status === 200 ? poor.token : a.token, 'POST', '/Voucher', body);
        if (status === 200) {
          // 598 EUR against a limit of 50: refused.
          expect(res.statusCode, res.body).toBe(417);
          expect(res.json().ErrorId).toBe(-3001);
          continue;
        }
        expect(res.statusCode, res.body).toBe(status);
        expect(res.json()).toMatchObject({ success: false, ErrorField: field });
      }
      expect(await used(a)).toBe(before);
      expect(await used(poor)).toBe(0);
      expect((await call(a.token, 'GET', '/Vouchers')).json().Vouchers.length).toBe(count);
    });

    it('bad-input/no OrderParameters, wrong types, an overlong PartnerOrderID: 417 naming the field', async () => {
      for (const [body, field] of [
        [{}, 'OrderParameters'],
        [{ OrderParameters: 'DV' }, 'OrderParameters'],
        [{ OrderParameters: { ValidityPeriod: 12 } }, 'ProductCode'],
        [terms({ ValidityPeriod: 'twelve' }), 'OrderParameters.ValidityPeriod'],
        [terms({ ServerCount: 'many' }), 'OrderParameters.ServerCount'],
        [terms({ PartnerOrderID: 'has spaces in it' }), 'PartnerOrderID'],
        [terms({ PartnerOrderID: { id: 'a' } }), 'OrderParameters.PartnerOrderID'],
      ] as [unknown, string][]) {
        const res = await call(a.token, 'POST', '/Voucher', body);
        expect(res.statusCode, `${JSON.stringify(body)} ${res.body}`).toBe(417);
        expect(res.json().ErrorField).toBe(field);
      }
    });

    it('fail/needs scope voucher (or write) and role VOUCHERS or ADMIN', async () => {
      const orderScope = await ctx.t.token(a, 'order');
      expect((await call(orderScope, 'POST', '/Voucher', terms())).statusCode).toBe(403);
      expect((await call(orderScope, 'GET', '/Vouchers')).statusCode).toBe(403);
      const orders = await memberToken(a, ['ORDERS']);
      expect((await call(orders, 'POST', '/Voucher', terms())).statusCode).toBe(403);
      const vouchers = await memberToken(a, ['VOUCHERS'], 'voucher');
      expect((await call(vouchers, 'POST', '/Voucher', terms())).statusCode).toBe(200);
      expect((await call(vouchers, 'GET', '/Vouchers')).statusCode).toBe(200);
      const readonly = await memberToken(a, ['READONLY']);
      const listed = await call(readonly, 'GET', '/Vouchers');
      expect(listed.statusCode).toBe(200);
      // A reader who may not make or void vouchers sees no code it could redeem.
      for (const v of listed.json().Vouchers as { VoucherCode: string }[])
        expect(v.VoucherCode).toMatch(/^\*{4}-\*{4}-\*{4}-\*{4}-\*{4}-[2-9A-Z]{4}$/);
      expect((await call(vouchers, 'GET', '/Vouchers')).json().Vouchers[0].VoucherCode).toMatch(CODE);
      expect((await call(readonly, 'POST', '/Voucher', terms())).statusCode).toBe(403);
      expect((await call(undefined, 'POST', '/Voucher', terms())).statusCode).toBe(401);
    });

    it('ok/twenty creations at once never pass the credit limit', async () => {
      // 49 EUR each against 500 EUR: ten fit.
      const c = await ctx.t.customer({ name: 'Limit race', creditLimit: 500 });
      const results = await Promise.all(Array.from({ length: 20 }, () => call(c.token, 'POST', '/Voucher', terms())));
      const ok = results.filter((r) => r.statusCode === 200).length;
      expect(ok).toBe(10);
      for (const r of results.filter((x) => x.statusCode !== 200)) expect(r.json().ErrorId).toBe(-3001);
      expect(await used(c)).toBe(490);
      expect((await call(c.token, 'GET', '/Vouchers')).json().Vouchers).toHaveLength(10);
    });
  });

  describe('GET /Vouchers, GET /Voucher/{code}', () => {
    it('ok/list the spec 2.13 fields, RedeemInfo once redeemed, under both order-id names', async () => {
      const fresh = await make(a, { PartnerOrderID: 'list-1' });
      const redeemed = await make(a, { PartnerOrderID: 'list-2' });
      const res = await redeem(redeemed);
      expect(res.statusCode, res.body).toBe(200);
      const orderId = res.json().ServiceOrderID as number;
      const list = (await call(a.token, 'GET', '/Vouchers')).json().Vouchers as { VoucherCode: string }[];
      const byCode = new Map(list.map((v) => [v.VoucherCode, v]));
      expect(byCode.get(fresh)).toEqual({
        VoucherCode: fresh,
        Redeemed: false,
        CreationDate: '2026-11-21T00:00:00Z',
        OrderParameters: {
          ProductCode: 'TrustPoint.DV',
          ServerCount: 1,
          SubjectAltNameCount: 0,
          ValidityPeriod: 12,
          Price: 49,
          Currency: 'EUR',
          PartnerOrderID: 'list-1',
        },
      });
      expect(byCode.get(redeemed)).toMatchObject({
        Redeemed: true,
        RedeemInfo: { RedeemDate: '2026-11-21T00:00:00Z', ServiceOrderID: orderId, CertCenterOrderID: orderId },
      });
      const one = await call(a.token, 'GET', `/Voucher/${redeemed}`);
      expect(one.json()).toEqual({ success: true, Vouchers: [byCode.get(redeemed)] });
    });

    it("cross-customer/another account's voucher is not found, not listed, not voided", async () => {
      const code = await make(a);
      const seen = await call(b.token, 'GET', `/Voucher/${code}`);
      expect(seen.statusCode).toBe(404);
      expect(seen.json()).toMatchObject({ success: false, ErrorId: -2011 });
      expect(
        (await call(b.token, 'GET', '/Vouchers')).json().Vouchers.map((v: { VoucherCode: string }) => v.VoucherCode),
      ).not.toContain(code);
      const voided = await call(b.token, 'DELETE', `/Voucher/${code}`);
      expect(voided.json()).toMatchObject({ success: false, ErrorId: 403 });
      expect((await call(a.token, 'GET', `/Voucher/${code}`)).json().Vouchers[0].Redeemed).toBe(false);
      expect((await call(undefined, 'GET', `/Voucher/*/${code}`, undefined, newAddress())).statusCode).toBe(200);
    });

    it('fail/an unknown or malformed code: 404 with ErrorId -2011', async () => {
      for (const code of ['ABCD-EFGH-JKMN-PQRS-TVWX-YZ23', 'not-a-code', 'x'.repeat(64)]) {
        const res = await call(a.token, 'GET', `/Voucher/${code}`);
        expect(res.statusCode).toBe(404);
        expect(res.json()).toMatchObject({ success: false, ErrorId: -2011 });
      }
      expect((await call(a.token, 'GET', `/Voucher/${'x'.repeat(65)}`)).statusCode).toBe(417);
    });
  });

  describe('DELETE /Voucher/{code}', () => {
    it('ok/voids an unredeemed voucher and releases its reservation; it can no longer be redeemed', async () => {
      const before = await used(a);
      const code = await make(a);
      expect(await used(a)).toBeCloseTo(before + 49, 2);
      const res = await call(a.token, 'DELETE', `/Voucher/${code}`);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toEqual({ success: true, Message: expect.any(String) });
      expect(await used(a)).toBe(before);
      expect(
        (await call(a.token, 'GET', '/Vouchers')).json().Vouchers.map((v: { VoucherCode: string }) => v.VoucherCode),
      ).not.toContain(code);
      expect((await redeem(code)).json()).toMatchObject({ success: false, ErrorId: -2011 });
      const audit = await ctx.t.db.kysely
        .selectFrom('audit_events')
        .select(['actor', 'client_address'])
        .where('action', '=', 'voucher.voided')
        .where('customer_id', '=', a.customerId)
        .execute();
      expect(audit.length).toBeGreaterThan(0);
    });

    it('fail/a redeemed, voided or unknown code: ErrorId 403, nothing changes', async () => {
      const redeemed = await make(a);
      expect((await redeem(redeemed)).statusCode).toBe(200);
      const voided = await make(a);
      expect((await call(a.token, 'DELETE', `/Voucher/${voided}`)).statusCode).toBe(200);
      const before = await used(a);
      const chargesBefore = await charges(a);
      for (const code of [redeemed, voided, 'ABCD-EFGH-JKMN-PQRS-TVWX-YZ23', 'garbage']) {
        const res = await call(a.token, 'DELETE', `/Voucher/${code}`);
        expect(res.statusCode).toBe(409);
        expect(res.json()).toMatchObject({ success: false, ErrorId: 403 });
      }
      expect(await used(a)).toBe(before);
      expect(await charges(a)).toEqual(chargesBefore);
    });

    it('ok/a void racing a redemption: one of them wins, and the books match the winner', async () => {
      for (let round = 0; round < 5; round++) {
        const before = await used(a);
        const code = await make(a);
        const [voided, redeemed] = await Promise.all([call(a.token, 'DELETE', `/Voucher/${code}`), redeem(code)]);
        expect([voided.statusCode, redeemed.statusCode].filter((s) => s === 200)).toHaveLength(1);
        const v = (await ctx.t.db.kysely.selectFrom('vouchers').select(['status']).execute()).length;
        expect(v).toBeGreaterThan(0);
        if (voided.statusCode === 200) expect(await used(a)).toBe(before);
        else expect(await used(a)).toBeCloseTo(before + 49, 2);
      }
    });
  });

  describe('GET /Voucher/*/{code} (no token)', () => {
    it('ok/shows only what the voucher pays for: no price, currency, owner or status', async () => {
      const code = await make(a, {
        ProductCode: 'TrustPoint.DVMultiDomain',
        SubjectAltNameCount: 5,
        ValidityPeriod: 24,
      });
      const res = await call(undefined, 'GET', `/Voucher/*/${code.toLowerCase()}`, undefined, newAddress());
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toEqual({
        success: true,
        Vouchers: [
          {
            OrderParameters: {
              ProductCode: 'TrustPoint.DVMultiDomain',
              ServerCount: 1,
              SubjectAltNameCount: 5,
              ValidityPeriod: 24,
            },
          },
        ],
      });
      // The percent-encoded star is the same path.
      expect((await call(undefined, 'GET', `/Voucher/%2A/${code}`, undefined, newAddress())).statusCode).toBe(200);
    });

    it('fail/unknown, voided and redeemed codes get the same answer, ErrorId -2011', async () => {
      const voided = await make(a);
      await call(a.token, 'DELETE', `/Voucher/${voided}`);
      const redeemed = await make(a);
      expect((await redeem(redeemed)).statusCode).toBe(200);
      const bodies = new Set<string>();
      for (const code of ['ABCD-EFGH-JKMN-PQRS-TVWX-YZ23', voided, redeemed]) {
        const res = await call(undefined, 'GET', `/Voucher/*/${code}`, undefined, newAddress());
        expect(res.statusCode).toBe(404);
        expect(res.json()).toMatchObject({ success: false, ErrorId: -2011, Message: 'The voucher token is invalid.' });
        bodies.add(res.body);
      }
      expect(bodies.size).toBe(1);
    });

    it('bad-input/a malformed code or a path that is not the star: a clear 4xx, never a 5xx', async () => {
      for (const path of [
        '/Voucher/*/x',
        '/Voucher/*/%00',
        `/Voucher/*/${'A'.repeat(65)}`,
        '/Voucher/x/ABCD',
        '/Voucher/*/',
      ]) {
        const res = await call(undefined, 'GET', path, undefined, newAddress());
        expect(res.statusCode, path).toBeGreaterThanOrEqual(400);
        expect(res.statusCode, path).toBeLessThan(500);
        expect(res.json().success).toBe(false);
      }
    });
  });

  describe('guessing codes', () => {
    it('ok/after 10 unknown codes an address waits 1 s, then 2, 4 …; a real code waits too; other addresses do not', async () => {
      const ip = '203.0.113.77';
      const code = await make(a);
      for (let i = 0; i < 10; i++) {
        const res = await call(undefined, 'GET', '/Voucher/*/ABCD-EFGH-JKMN-PQRS-TVWX-YZ23', undefined, ip);
        expect(res.statusCode, `guess ${i}`).toBe(404);
      }
      const blocked = await call(undefined, 'GET', `/Voucher/*/${code}`, undefined, ip);
      expect(blocked.statusCode).toBe(429);
      expect(blocked.headers['retry-after']).toBe('1');
      expect((await call(undefined, 'POST', '/Redeem', redeemBody(code), ip)).statusCode).toBe(429);
      expect((await call(undefined, 'GET', `/Order/*/${code}`, undefined, ip)).statusCode).toBe(429);
      expect((await call(undefined, 'GET', `/Voucher/*/${code}`, undefined, '203.0.113.78')).statusCode).toBe(200);
      // One more guess after the wait doubles it.
      ctx.t.clock.set(ctx.t.clock.nowSeconds() + 1);
      try {
        expect(
          (await call(undefined, 'GET', '/Voucher/*/ABCD-EFGH-JKMN-PQRS-TVWX-YZ23', undefined, ip)).statusCode,
        ).toBe(404);
        expect((await call(undefined, 'GET', `/Voucher/*/${code}`, undefined, ip)).headers['retry-after']).toBe('2');
      } finally {
        ctx.t.clock.set(ctx.t.clock.nowSeconds() - 1);
      }
    });
  });

  describe('guessing codes at once', () => {
    it('ok/thirty unknown codes sent at once from one address: ten are looked up, the rest wait', async () => {
      const ip = '203.0.113.91';
      const results = await Promise.all(
        Array.from({ length: 30 }, () =>
          call(undefined, 'GET', '/Voucher/*/ABCD-EFGH-JKMN-PQRS-TVWX-YZ23', undefined, ip),
        ),
      );
      expect(results.filter((r) => r.statusCode === 404)).toHaveLength(10);
      expect(results.filter((r) => r.statusCode === 429)).toHaveLength(20);
    });

    it('ok/a redeemer looking at its own redeemed code again and again is not taken for a guesser', async () => {
      const ip = '203.0.113.92';
      const code = await make(a);
      expect((await redeem(code, {}, ip)).statusCode).toBe(200);
      for (let i = 0; i < 15; i++)
        expect((await call(undefined, 'GET', `/Voucher/*/${code}`, undefined, ip)).statusCode).toBe(404);
      expect((await call(undefined, 'GET', `/Order/*/${code}`, undefined, ip)).statusCode).toBe(200);
    });
  });

  describe('POST /Redeem (no token)', () => {
    it("ok/creates the voucher owner's order, charged once at the reserved price, issued inline; openssl verifies it", async () => {
      const before = await used(a);
      const code = await make(a, { PartnerOrderID: 'redeem-ok' });
      const ip = newAddress();
      const res = await call(undefined, 'POST', '/Redeem', redeemBody(code), ip);
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json();
      expect(body).toMatchObject({
        success: true,
        ServiceOrderID: expect.any(Number),
        OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, DNSAuthDetails: expect.any(Object) },
        Fulfillment: { Certificate: expect.stringContaining('BEGIN CERTIFICATE') },
      });
      expect(body.CertCenterOrderID).toBe(body.ServiceOrderID);
      // The seller's reference is not shown to the redeemer.
      expect(body.OrderParameters.PartnerOrderID).toBeUndefined();
      expect(
        verifyDelivered(
          ctx.t.services.ca,
          {
            certificate: body.Fulfillment.Certificate,
            intermediate: body.Fulfillment.Intermediate,
          },
          ctx.t.clock.nowSeconds(),
        ),
      ).toMatch(/: OK/);
      // The owner's order, with the voucher's PartnerOrderID; the reservation became the charge.
      const mine = (await ordersOf(a)).find((o) => o.ServiceOrderID === body.ServiceOrderID);
      expect(mine?.OrderParameters.PartnerOrderID).toBe('redeem-ok');
      expect(await used(a)).toBeCloseTo(before + 49, 2);
      expect((await charges(a)).filter((c) => c.orderId === body.ServiceOrderID)).toEqual([
        { orderId: body.ServiceOrderID, amount: 4900 },
      ]);
      const modified = await call(
        a.token,
        'GET',
        '/ModifiedOrders?FromDate=2026-11-20T00:00:00Z&ToDate=2026-11-22T00:00:00Z',
      );
      expect(modified.json().OrderInfos.map((o: { ServiceOrderID: number }) => o.ServiceOrderID)).toContain(
        body.ServiceOrderID,
      );
      const audit = await ctx.t.db.kysely
        .selectFrom('audit_events')
        .select(['actor', 'client_address', 'action'])
        .where('subject', 'in', [String(body.ServiceOrderID)])
        .where('action', '=', 'order.placed')
        .executeTakeFirstOrThrow();
      expect(audit).toMatchObject({ actor: expect.stringMatching(/^voucher:/), client_address: ip });
      const redeemedEvent = await ctx.t.db.kysely
        .selectFrom('audit_events')
        .select(['client_address', 'details'])
        .where('action', '=', 'voucher.redeemed')
        .where('client_address', '=', ip)
        .executeTakeFirstOrThrow();
      expect(JSON.parse(redeemedEvent.details!).orderId).toBe(body.ServiceOrderID);
    });

    it('ok/a retry of the same redemption answers with its order; another body with the code is refused', async () => {
      const code = await make(a);
      const first = await redeem(code);
      const again = await redeem(code);
      expect(again.statusCode, again.body).toBe(200);
      expect(again.json().ServiceOrderID).toBe(first.json().ServiceOrderID);
      const other = await redeem(code, {
        ValidityPeriod: 12,
        SignatureHashAlgorithm: 'SHA256-FULL-CHAIN',
        DVAuthMethod: 'DNS',
        CSR: testCsr().pem,
        ServerCount: 1,
      });
      expect(other.statusCode).toBe(404);
      expect(other.json()).toMatchObject({ ErrorId: -2011, ServiceOrderID: 0 });
      expect((await charges(a)).filter((c) => c.orderId === first.json().ServiceOrderID)).toHaveLength(1);
    });

    it("cross-customer/a redeemer holding B's token still orders for and charges A; B sees nothing", async () => {
      const code = await make(a);
      const usedB = await used(b);
      const ordersB = (await ordersOf(b)).length;
      const res = await call(b.token, 'POST', '/Redeem', redeemBody(code), newAddress());
      expect(res.statusCode, res.body).toBe(200);
      const id = res.json().ServiceOrderID as number;
      expect((await ordersOf(a)).map((o) => o.ServiceOrderID)).toContain(id);
      expect((await ordersOf(b)).length).toBe(ordersB);
      expect(await used(b)).toBe(usedB);
      expect((await call(b.token, 'GET', `/Order/${id}`)).statusCode).toBe(404);
    });

    it('fail/another product, more names, servers or validity than paid for, extras, a bad CSR: refused, and the voucher stays redeemable', async () => {
      const code = await make(a, { ProductCode: 'TrustPoint.DVMultiDomain', SubjectAltNameCount: 1 });
      const multi = (params: Record<string, unknown>) => ({ ProductCode: 'TrustPoint.DVMultiDomain', ...params });
      const cases: [Record<string, unknown>, string][] = [
        [{ ProductCode: 'TrustPoint.DV' }, 'ProductCode'],
        [multi({ SubjectAltNames: ['a.certdesk-test.com', 'b.certdesk-test.com'] }), 'SubjectAltNames'],
        [multi({ SubjectAltNames: ['*.certdesk-test.com'] }), 'SubjectAltNames'],
        [multi({ ValidityPeriod: 24 }), 'ValidityPeriod'],
        [multi({ ServerCount: 2 }), 'ServerCount'],
        [multi({ InstallationService: true }), 'InstallationService'],
        [multi({ CSR: '-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----' }), 'CSR'],
      ];
      const before = await used(a);
      for (const [params, field] of cases) {
        const res = await redeem(code, params);
        expect(res.statusCode, `${field} ${res.body}`).toBe(417);
        expect(
          res.json().Errors.map((e: { ErrorField: string }) => e.ErrorField),
          res.body,
        ).toContain(field);
        expect(res.json()).toMatchObject({ ServiceOrderID: 0, CertCenterOrderID: 0 });
      }
      expect(await used(a)).toBe(before);
      const ok = await redeem(code, multi({ SubjectAltNames: ['certdesk-test.com'] }));
      expect(ok.statusCode, ok.body).toBe(200);
    });

    it('fail/the free product without its DNS record: refused with -3202, and the voucher stays redeemable', async () => {
      const code = await make(a, { ProductCode: 'TrustPoint.FreeDV', ValidityPeriod: 180 });
      const body = {
        VoucherCode: code,
        OrderParameters: {
          ProductCode: 'TrustPoint.FreeDV',
          ValidityPeriod: 180,
          CSR: testCsr().pem,
          DVAuthMethod: 'DNS',
        },
      };
      ctx.dns.set('certdesk-test.com', []);
      try {
        const res = await call(undefined, 'POST', '/Redeem', body, newAddress());
        expect(res.statusCode, res.body).toBe(417);
        expect(res.json()).toMatchObject({ ErrorId: -3202, ErrorField: 'failed_dns' });
        // The refusal says what to publish: the redeemer needs nothing from the seller.
        const record = /Publish: (\S+)\. 3600 IN TXT "([^"]+)"/.exec(res.json().Message as string);
        expect(record, res.json().Message).not.toBeNull();
        ctx.dns.set(record![1]!, [{ type: 'TXT', data: record![2]! }]);
      } catch (e) {
        const value = (
          await call(a.token, 'POST', '/DNSData', { CSR: testCsr().pem, ProductCode: 'TrustPoint.DV' })
        ).json().DNSAuthDetails.DNSValue;
        ctx.dns.set('certdesk-test.com', [{ type: 'TXT', data: value }]);
        throw e;
      }
      const ok = await call(undefined, 'POST', '/Redeem', body, newAddress());
      expect(ok.statusCode, ok.body).toBe(200);
      expect(ok.json().Fulfillment).toBeDefined();
    });

    it('bad-input/no code, a malformed code, an unknown code, garbage bodies: a clear 4xx, nothing stored', async () => {
      const ordersBefore = (await ordersOf(a)).length;
      const cases: [unknown, number, number][] = [
        [dnsOrderBody(), 417, -1001],
        [{ VoucherCode: 'nope', ...dnsOrderBody() }, 404, -2011],
        [{ VoucherCode: 'ABCD-EFGH-JKMN-PQRS-TVWX-YZ23', ...dnsOrderBody() }, 404, -2011],
        [{ VoucherCode: 42, ...dnsOrderBody() }, 404, -2011],
        [{ VoucherCode: { code: 'x' }, ...dnsOrderBody() }, 417, -1001],
        [{ VoucherCode: 'ABCD-EFGH-JKMN-PQRS-TVWX-YZ23' }, 417, -1001],
        ['[1,2,3]', 417, -1001],
      ];
      for (const [body, status, errorId] of cases) {
        const res = await ctx.t.app.inject({
          method: 'POST',
          url: '/rest/v1/Redeem',
          payload: typeof body === 'string' ? body : (body as object),
          headers: { 'content-type': 'application/json' },
          remoteAddress: newAddress(),
        });
        expect(res.statusCode, `${JSON.stringify(body)} ${res.body}`).toBe(status);
        expect(res.json()).toMatchObject({ success: false, ErrorId: errorId });
      }
      expect((await ordersOf(a)).length).toBe(ordersBefore);
    });

    it('ok/a product that left the catalog and a changed price: the voucher still redeems, at the reserved price', async () => {
      const gone = await make(a, { ProductCode: 'TrustPoint.DV', ValidityPeriod: 24 });
      const repriced = await make(a, { ProductCode: 'TrustPoint.DVMultiDomain', SubjectAltNameCount: 1 });
      const reserved = Number(
        (
          await ctx.t.db.kysely
            .selectFrom('vouchers')
            .select('price_minor')
            .orderBy('id', 'desc')
            .executeTakeFirstOrThrow()
        ).price_minor,
      );
      // A second service over the same database with a new catalog: TrustPoint.DV dropped, the
      // multi-domain product at twice the price.
      const catalog = JSON.parse(readFileSync('catalog/default.json', 'utf8')) as {
        products: { code: string; prices: Record<string, Record<string, number>> }[];
      };
      catalog.products = catalog.products.filter((p) => p.code !== 'TrustPoint.DV');
      const multi = catalog.products.find((p) => p.code === 'TrustPoint.DVMultiDomain')!;
      for (const [k, v] of Object.entries(multi.prices.EUR!)) multi.prices.EUR![k] = v * 2;
      const file = join(mkdtempSync(join(tmpdir(), 'catalog-')), 'catalog.json');
      writeFileSync(file, JSON.stringify(catalog));
      const other = await createServices(
        loadConfig({
          CERTDESK_DATA_DIR: '/nonexistent-test-data',
          CERTDESK_DNS_SERVERS: ctx.t.services.config.dnsServers!.join(','),
          CERTDESK_CATALOG: file,
          CERTDESK_CA_KEY_FILE: caKeyFile(ctx.t.services.config),
        }),
        { clock: ctx.t.clock, db: ctx.t.db },
      );
      const app = await createWebApp(other, false);
      try {
        expect(() => other.catalog.product('TrustPoint.DV')).toThrow();
        const there = (code: string, params: Record<string, unknown>) =>
          app.inject({
            method: 'POST',
            url: '/rest/v1/Redeem',
            payload: redeemBody(code, params),
            remoteAddress: newAddress(),
          });
        const before = await used(a);
        const first = await there(gone, { ValidityPeriod: 24 });
        expect(first.statusCode, first.body).toBe(200);
        expect((await charges(a)).find((c) => c.orderId === first.json().ServiceOrderID)?.amount).toBe(9800);
        const second = await there(repriced, {
          ProductCode: 'TrustPoint.DVMultiDomain',
          SubjectAltNames: ['certdesk-test.com'],
        });
        expect(second.statusCode, second.body).toBe(200);
        expect((await charges(a)).find((c) => c.orderId === second.json().ServiceOrderID)?.amount).toBe(reserved);
        expect(await used(a)).toBe(before);
      } finally {
        await app.close();
      }
    });

    it('ok/a lowered credit limit does not stop a voucher already paid for from redeeming', async () => {
      const c = await ctx.t.customer({ name: 'Lowered', creditLimit: 100 });
      const code = await make(c);
      await ctx.t.db.kysely
        .updateTable('customers')
        .set({ credit_limit_minor: 0 })
        .where('id', '=', c.customerId)
        .execute();
      expect((await call(c.token, 'POST', '/Voucher', terms())).json().ErrorId).toBe(-3001);
      const value = (
        await call(c.token, 'POST', '/DNSData', { CSR: testCsr().pem, ProductCode: 'TrustPoint.DV' })
      ).json().DNSAuthDetails.DNSValue;
      ctx.dns.set('certdesk-test.com', [{ type: 'TXT', data: value }]);
      try {
        const res = await redeem(code);
        expect(res.statusCode, res.body).toBe(200);
        expect(res.json().Fulfillment).toBeDefined();
      } finally {
        const own = (
          await call(a.token, 'POST', '/DNSData', { CSR: testCsr().pem, ProductCode: 'TrustPoint.DV' })
        ).json().DNSAuthDetails.DNSValue;
        ctx.dns.set('certdesk-test.com', [{ type: 'TXT', data: own }]);
      }
      expect(await used(c)).toBe(49);
    });

    it('ok/100 redemptions of one code at once: one order, one charge, every answer that one order', async () => {
      const before = await used(a);
      const chargesBefore = (await charges(a)).length;
      const code = await make(a);
      const results = await Promise.all(Array.from({ length: 100 }, () => redeem(code, {}, '192.0.2.200')));
      const ids = new Set(results.filter((r) => r.statusCode === 200).map((r) => r.json().ServiceOrderID as number));
      for (const r of results) expect([200, 404, 429], r.body).toContain(r.statusCode);
      expect(ids.size).toBe(1);
      expect((await charges(a)).length).toBe(chargesBefore + 1);
      expect(await used(a)).toBeCloseTo(before + 49, 2);
      const orders = await ctx.t.db.kysely
        .selectFrom('orders')
        .select('id')
        .where('customer_id', '=', a.customerId)
        .where('id', 'in', [...ids])
        .execute();
      expect(orders).toHaveLength(1);
    });

    it('ok/ten different redemptions of one code at once: exactly one wins, the others are invalid codes', async () => {
      const chargesBefore = (await charges(a)).length;
      const code = await make(a);
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          call(
            undefined,
            'POST',
            '/Redeem',
            { ...redeemBody(code), AdminContact: { ...ORDER_CONTACT, FirstName: `Ada ${i}` } },
            newAddress(),
          ),
        ),
      );
      expect(results.filter((r) => r.statusCode === 200)).toHaveLength(1);
      for (const r of results.filter((x) => x.statusCode !== 200)) expect(r.json().ErrorId, r.body).toBe(-2011);
      expect((await charges(a)).length).toBe(chargesBefore + 1);
    });
  });

  describe('fuzzing', () => {
    it('bad-input/1,000 random POST /Redeem and POST /Voucher bodies: a 4xx envelope, never a 5xx; the live voucher stays redeemable', async () => {
      let seed = 20261124;
      const rand = () => {
        seed = (seed * 1103515245 + 12345) % 2147483648;
        return seed / 2147483648;
      };
      const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)]!;
      const live = await make(a);
      const values: unknown[] = [
        null,
        true,
        0,
        -1,
        1e308,
        12,
        '12',
        '',
        'x'.repeat(3000),
        [],
        {},
        [[[]]],
        '\u0000',
        '💥',
        live,
        live.toLowerCase(),
        'TrustPoint.DV',
        'TrustPoint.FreeDV',
        testCsr().pem,
        { a: 1 },
        ['a.certdesk-test.com'],
      ];
      const members = [
        'VoucherCode',
        'ProductCode',
        'ValidityPeriod',
        'ServerCount',
        'SubjectAltNameCount',
        'SubjectAltNames',
        'CSR',
        'DVAuthMethod',
        'PartnerOrderID',
        'InstallationService',
        'DomainApprovers',
      ];
      const randomParams = () =>
        Object.fromEntries(Array.from({ length: Math.floor(rand() * 6) }, () => [pick(members), pick(values)]));
      const shapes: (() => unknown)[] = [
        () => ({
          VoucherCode: pick(values),
          OrderParameters: randomParams(),
          AdminContact: pick(values),
          TechContact: pick(values),
        }),
        () => ({
          VoucherCode: live,
          OrderParameters: { ...randomParams(), ProductCode: 'TrustPoint.DV', CSR: 'garbage' },
        }),
        () => ({ OrderParameters: pick(values) }),
        () => pick(values),
        () => JSON.stringify({ VoucherCode: live, OrderParameters: randomParams() }).slice(0, Math.floor(rand() * 120)),
      ];
      const ordersBefore = (await ordersOf(a)).length;
      for (let i = 0; i < 1000; i++) {
        const url = pick(['/rest/v1/Redeem', '/rest/v1/Voucher', '/rest/v1/Redeem']);
        const shape = pick(shapes)();
        const res = await ctx.t.app.inject({
          method: 'POST',
          url,
          payload: typeof shape === 'string' ? shape : JSON.stringify(shape),
          headers: {
            'content-type': 'application/json',
            ...(url.endsWith('Voucher') ? { authorization: `Bearer ${b.token}` } : {}),
          },
          remoteAddress: `10.${i % 200}.${Math.floor(rand() * 250)}.1`,
        });
        expect
          .soft(res.statusCode, `case ${i}: ${url} ${JSON.stringify(shape).slice(0, 200)} → ${res.body.slice(0, 200)}`)
          .toBeLessThan(500);
        if (res.statusCode >= 400) expect.soft(res.json().success, `case ${i}`).toBe(false);
      }
      expect((await ordersOf(a)).length).toBe(ordersBefore);
      const ok = await redeem(live);
      expect(ok.statusCode, ok.body).toBe(200);
    });
  });

  describe('GET /Order/*/{code} (no token)', () => {
    it("ok/the redeemed order in GET /Order/{id}'s shape with its certificate; never billing or contacts", async () => {
      const code = await make(a, { PartnerOrderID: 'collect-1' });
      const placed = (await redeem(code)).json();
      const res = await call(
        undefined,
        'GET',
        `/Order/*/${code}?includeBillingDetails=true&includeContacts=true&includeOrderParameters=true`,
        undefined,
        newAddress(),
      );
      expect(res.statusCode, res.body).toBe(200);
      const info = res.json().OrderInfo;
      const own = (await call(a.token, 'GET', `/Order/${placed.ServiceOrderID}?includeFulfillment=true`)).json()
        .OrderInfo;
      expect(info).toMatchObject({
        ServiceOrderID: placed.ServiceOrderID,
        CertCenterOrderID: placed.ServiceOrderID,
        CommonName: own.CommonName,
        OrderStatus: own.OrderStatus,
        Fulfillment: own.Fulfillment,
      });
      expect(info.OrderStatus.MajorStatus).toBe('COMPLETE');
      expect(info.BillingInfo).toBeUndefined();
      expect(info.ContactInfo).toBeUndefined();
      expect(info.OrderParameters.PartnerOrderID).toBeUndefined();
      expect(JSON.stringify(res.json())).not.toContain('Voucher seller');
      const lean = await call(undefined, 'GET', `/Order/*/${code}?includeFulfillment=false`, undefined, newAddress());
      expect(lean.json().OrderInfo.Fulfillment).toBeUndefined();
    });

    it('fail/unknown and voided codes: -2011; a code not redeemed yet says so', async () => {
      const voided = await make(a);
      await call(a.token, 'DELETE', `/Voucher/${voided}`);
      for (const code of ['ABCD-EFGH-JKMN-PQRS-TVWX-YZ23', voided, 'junk']) {
        const res = await call(undefined, 'GET', `/Order/*/${code}`, undefined, newAddress());
        expect(res.statusCode).toBe(404);
        expect(res.json()).toMatchObject({ success: false, ErrorId: -2011 });
      }
      const fresh = await make(a);
      const res = await call(undefined, 'GET', `/Order/*/${fresh}`, undefined, newAddress());
      expect(res.json()).toMatchObject({
        success: false,
        ErrorId: -2011,
        Message: expect.stringMatching(/not been redeemed/),
      });
      // GET /Order/{id} is untouched by the star route.
      expect((await call(a.token, 'GET', '/Order/abc')).statusCode).toBeGreaterThanOrEqual(400);
    });
  });
});
