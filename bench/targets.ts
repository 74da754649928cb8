// What is measured: the baseline and the certdesk routes of the issue, with their goals.
import type { ChildFixtures, ServerKind, ServerSetup } from './protocol.js';

export interface Goal {
  /** Shown in the table, e.g. "≥ 50 % of baseline". */
  readonly text: string;
  met(result: { medianReqPerSec: number; ratioToBaseline: number; medianP99Ms: number }): boolean;
}

/** What a request needs from the setup: the bearer token, the CSR made by openssl, what the child made. */
export interface Fixtures {
  readonly token: string;
  readonly csrPem: string;
  readonly child: ChildFixtures;
}

export interface RequestSpec {
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body?: string;
  /** A new body for every request (a voucher code is redeemed once): used instead of `body`. */
  readonly bodies?: () => string;
}

/** The body of the next request of `spec`. */
export function bodyOf(spec: RequestSpec): string | undefined {
  return spec.bodies?.() ?? spec.body;
}

export interface Target {
  readonly id: string;
  readonly label: string;
  readonly server: ServerKind;
  request(f: Fixtures): RequestSpec;
  /** Whether one response is the real thing (checked before and after the runs). */
  check(status: number, body: unknown, f: Fixtures): string | undefined;
  readonly goal?: Goal;
  /** Diagnostic target: measured only when BENCH_TARGETS names it. */
  readonly optional?: boolean;
  /** What the certdesk child prepares (default `plain`). */
  readonly setup?: ServerSetup;
  /** Targets with the same key are served by one child (started for the first of them). */
  readonly sharedServer?: string;
  /** One request at a time on one connection, whatever BENCH_CONNECTIONS says (a latency goal without queueing). */
  readonly sequential?: boolean;
  /** Paced load: requests started per second (bench/load.ts); undefined: closed loop. */
  readonly rate?: number;
  /** Needs PostgreSQL: measured only when benchDatabaseUrl() is set. */
  readonly postgres?: boolean;
  /** The status a good answer has when it is not a 2xx (a redirect). */
  readonly okStatus?: number;
}

/** The PostgreSQL server of the `…Pg` targets: CERTDESK_BENCH_DATABASE_URL, else CERTDESK_TEST_DATABASE_URL. */
export function benchDatabaseUrl(): string | undefined {
  for (const name of ['CERTDESK_BENCH_DATABASE_URL', 'CERTDESK_TEST_DATABASE_URL']) {
    const url = process.env[name]?.trim();
    if (url !== undefined && url !== '') return url;
  }
  return undefined;
}

/** The product of the inline-issuance targets: free (price 0), validity in days. */
export const ORDER_INLINE_PRODUCT = { code: 'TrustPoint.FreeDV', validityPeriod: 180 } as const;

/**
 * The POST /Order body of the inline-issuance targets. No PartnerOrderID: the server makes one,
 * so the same body sent again is a new order each time.
 */
export function orderInlineBody(csrPem: string): string {
  const contact = { FirstName: 'Ada', LastName: 'Lovelace', Phone: '+49 30 1234567', Email: 'ada@certdesk-bench.com' };
  return JSON.stringify({
    OrderParameters: {
      ProductCode: ORDER_INLINE_PRODUCT.code,
      ValidityPeriod: ORDER_INLINE_PRODUCT.validityPeriod,
      DVAuthMethod: 'DNS',
      CSR: csrPem,
    },
    AdminContact: contact,
    TechContact: contact,
  });
}

/** Which of the child's voucher codes the next redemption uses: each is redeemed once. */
let nextVoucher = 0;

/** POST /Redeem's body: the inline order's body with the next unused voucher code. */
function redeemInlineBody(csrPem: string, codes: readonly string[]): string {
  const code = codes[nextVoucher++];
  // Past the last code the request is sent without one: it fails, and the run is reported broken.
  return JSON.stringify({ ...(JSON.parse(orderInlineBody(csrPem)) as object), VoucherCode: code ?? 'none-left' });
}

/** The rate at which the inline-issuance latency goal holds (the throughput goal). */
const ORDER_RATE = 300;

const QUOTE_QUERY = 'ProductCode=TrustPoint.DV&ValidityPeriod=12&ServerCount=1&SubjectAltNameCount=0';

function okEnvelope(
  status: number,
  body: unknown,
  extra: (b: Record<string, unknown>) => string | undefined,
): string | undefined {
  if (status !== 200) return `HTTP ${status}: ${JSON.stringify(body)}`;
  if (typeof body !== 'object' || body === null) return `not a JSON object: ${JSON.stringify(body)}`;
  const b = body as Record<string, unknown>;
  if (b.success !== true) return `success is not true: ${JSON.stringify(body)}`;
  return extra(b);
}

/** A placed order's answer carrying its certificate (issued inline). */
const issuedInline = (status: number, body: unknown): string | undefined =>
  okEnvelope(status, body, (b) => {
    const cert = (b.Fulfillment as { Certificate?: unknown } | undefined)?.Certificate;
    return typeof cert === 'string' && cert.startsWith('-----BEGIN CERTIFICATE-----')
      ? undefined
      : `no Fulfillment.Certificate: ${JSON.stringify(body).slice(0, 300)}`;
  });

const bearer = (f: Fixtures) => ({ authorization: `Bearer ${f.token}` });

function orderInlineTarget(
  id: string,
  label: string,
  pg: boolean,
  rate: number | undefined,
  goal: Goal | undefined,
): Target {
  return {
    id,
    label,
    server: 'certdesk',
    setup: pg ? 'ordersPg' : 'orders',
    ...(pg ? { postgres: true } : {}),
    ...(rate === undefined ? {} : { rate }),
    ...(goal === undefined ? {} : { goal }),
    request: (f) => ({
      method: 'POST',
      path: '/rest/v1/Order',
      headers: { ...bearer(f), 'content-type': 'application/json' },
      body: orderInlineBody(f.csrPem),
    }),
    check: issuedInline,
  };
}

const p99Under = (ms: number): Goal => ({ text: `p99 < ${ms} ms`, met: (r) => r.medianP99Ms < ms });

/** GET /Orders and /ModifiedOrders over 1M orders: one child for all, requests one at a time (the latency of one request). */
function ordersListTarget(
  id: string,
  label: string,
  path: (f: Fixtures) => string,
  check: (b: Record<string, unknown>, f: ChildFixtures) => string | undefined,
  optional = false,
): Target {
  return {
    id,
    label,
    server: 'certdesk',
    setup: 'orders1m',
    sharedServer: 'orders1m',
    sequential: true,
    ...(optional ? { optional } : { goal: p99Under(20) }),
    request: (f) => ({ method: 'GET', path: path(f), headers: bearer(f) }),
    check: (status, body, f) => okEnvelope(status, body, (b) => check(b, f.child)),
  };
}

const infos = (b: Record<string, unknown>) => (Array.isArray(b.OrderInfos) ? (b.OrderInfos as unknown[]) : undefined);
const pageOf100 = (b: Record<string, unknown>) => {
  const available = (b._meta as { ItemsAvailable?: unknown } | undefined)?.ItemsAvailable;
  if (infos(b)?.length !== 100) return `expected 100 OrderInfos, got ${infos(b)?.length ?? 'none'}`;
  return typeof available === 'number' && available >= 1_000_000
    ? undefined
    : `_meta.ItemsAvailable is ${String(available)}, expected ≥ 1,000,000`;
};

export const TARGETS: readonly Target[] = [
  {
    id: 'baseline',
    label: 'baseline (bare Fastify GET /)',
    server: 'baseline',
    request: () => ({ method: 'GET', path: '/', headers: {} }),
    check: (status, body) =>
      status === 200 && (body as { hello?: unknown } | null)?.hello === 'world'
        ? undefined
        : `HTTP ${status}: ${JSON.stringify(body)}`,
  },
  {
    // The certdesk app's floor: its global hooks, no token, no rate limiter, no database.
    id: 'healthz',
    label: 'GET /healthz (certdesk floor)',
    server: 'certdesk',
    optional: true,
    request: () => ({ method: 'GET', path: '/healthz', headers: {} }),
    check: (status, body) => okEnvelope(status, body, () => undefined),
  },
  {
    // RFC 6749 §4.4 as integrations call it: a form body, SHA-256 of a 256-bit secret, two tokens stored.
    id: 'token',
    label: 'POST /oauth2/token (client_credentials)',
    server: 'certdesk',
    request: (f) => ({
      method: 'POST',
      path: '/oauth2/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: f.child.client?.clientId ?? '',
        client_secret: f.child.client?.clientSecret ?? '',
      }).toString(),
    }),
    check: (status, body) =>
      status === 200 && typeof (body as { access_token?: unknown } | null)?.access_token === 'string'
        ? undefined
        : `HTTP ${status}: ${JSON.stringify(body)}`,
  },
  {
    // Bound by argon2id (m=19456 KiB, t=2, p=1: @node-rs/argon2's defaults, OWASP's minimum): one
    // hash per sign-in on the libuv pool, plus the throttle lookups, the session row and an audit row.
    id: 'signIn',
    label: 'POST /signin (argon2id m=19456 KiB, t=2, p=1)',
    server: 'certdesk',
    request: (f) => ({
      method: 'POST',
      path: '/signin',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        username: f.child.signIn?.username ?? '',
        password: f.child.signIn?.password ?? '',
      }).toString(),
    }),
    okStatus: 303,
    check: (status) => (status === 303 ? undefined : `HTTP ${status}: expected 303 to the account page`),
  },
  {
    id: 'profile',
    label: 'GET /rest/v1/Profile',
    server: 'certdesk',
    request: (f) => ({ method: 'GET', path: '/rest/v1/Profile', headers: bearer(f) }),
    check: (status, body) =>
      okEnvelope(status, body, (b) => (typeof b.CustomerID === 'number' ? undefined : 'no CustomerID')),
    goal: { text: '≥ 50 % of baseline', met: (r) => r.ratioToBaseline >= 0.5 },
  },
  {
    id: 'quote',
    label: 'GET /rest/v1/Quote (TrustPoint.DV, 12 months)',
    server: 'certdesk',
    request: (f) => ({ method: 'GET', path: `/rest/v1/Quote?${QUOTE_QUERY}`, headers: bearer(f) }),
    check: (status, body) => okEnvelope(status, body, (b) => (typeof b.Price === 'number' ? undefined : 'no Price')),
  },
  {
    id: 'validateCsr',
    label: 'POST /rest/v1/ValidateCSR (RSA-2048)',
    server: 'certdesk',
    request: (f) => ({
      method: 'POST',
      path: '/rest/v1/ValidateCSR',
      headers: { ...bearer(f), 'content-type': 'application/json' },
      body: JSON.stringify({ CSR: f.csrPem }),
    }),
    check: (status, body) =>
      okEnvelope(status, body, (b) =>
        (b.ParsedCSR as { KeyLength?: unknown } | undefined)?.KeyLength === 2048
          ? undefined
          : 'ParsedCSR.KeyLength is not 2048',
      ),
    goal: { text: '≥ 2,000 req/s', met: (r) => r.medianReqPerSec >= 2000 },
  },
  {
    id: 'ocsp',
    label: 'GET /ocsp/<request> (cached signed response)',
    server: 'certdesk',
    request: (f) => ({ method: 'GET', path: f.child.ocspPath ?? '/ocsp/missing', headers: {} }),
    // The body is DER (read here as text): a successful OCSPResponse is far longer than an error one (5 bytes).
    check: (status, body) =>
      status === 200 && typeof body === 'string' && body.length > 100
        ? undefined
        : `HTTP ${status}, ${typeof body === 'string' ? body.length : 0} bytes`,
    goal: { text: '≥ 5,000 req/s', met: (r) => r.medianReqPerSec >= 5000 },
  },
  orderInlineTarget(
    'orderInline',
    'POST /rest/v1/Order (FreeDV, DNS proof in place: issued inline)',
    false,
    undefined,
    { text: `≥ ${ORDER_RATE} req/s`, met: (r) => r.medianReqPerSec >= ORDER_RATE },
  ),
  orderInlineTarget('orderInlineAt300', `POST /rest/v1/Order inline, paced at ${ORDER_RATE}/s`, false, ORDER_RATE, {
    // The server must keep up with the pace too (a run that falls behind has fewer answers).
    text: `p99 < 100 ms at ${ORDER_RATE}/s`,
    met: (r) => r.medianP99Ms < 100 && r.medianReqPerSec >= 0.97 * ORDER_RATE,
  }),
  orderInlineTarget('orderInlinePg', 'POST /rest/v1/Order inline on PostgreSQL', true, undefined, undefined),
  {
    id: 'redeemInline',
    label: 'POST /rest/v1/Redeem (FreeDV voucher, DNS proof in place: issued inline)',
    server: 'certdesk',
    setup: 'vouchers',
    request: (f) => ({
      method: 'POST',
      path: '/rest/v1/Redeem',
      headers: { 'content-type': 'application/json' },
      bodies: () => redeemInlineBody(f.csrPem, f.child.voucherCodes ?? []),
    }),
    check: issuedInline,
    goal: { text: `≥ ${ORDER_RATE} req/s`, met: (r) => r.medianReqPerSec >= ORDER_RATE },
  },
  {
    id: 'getOrder',
    label: 'GET /rest/v1/Order/{id} (a COMPLETE order)',
    server: 'certdesk',
    setup: 'orders',
    request: (f) => ({ method: 'GET', path: `/rest/v1/Order/${f.child.orderId ?? 0}`, headers: bearer(f) }),
    check: (status, body, f) =>
      okEnvelope(status, body, (b) => {
        const info = b.OrderInfo as { ServiceOrderID?: unknown; OrderStatus?: { MajorStatus?: unknown } } | undefined;
        return info?.ServiceOrderID === f.child.orderId && info?.OrderStatus?.MajorStatus === 'COMPLETE'
          ? undefined
          : `not the COMPLETE order ${String(f.child.orderId)}: ${JSON.stringify(body).slice(0, 300)}`;
      }),
    goal: { text: '≥ 50 % of baseline', met: (r) => r.ratioToBaseline >= 0.5 },
  },
  ordersListTarget(
    'orders1m',
    'GET /rest/v1/Orders?ItemsPerPage=100&Page=1 (1M orders, 1 conn)',
    () => '/rest/v1/Orders?ItemsPerPage=100&Page=1',
    pageOf100,
  ),
  ordersListTarget(
    'modified1m',
    'GET /rest/v1/ModifiedOrders (≥ 100 of 1M orders, 1 conn)',
    (f) => {
      const w = f.child.modifiedWindow;
      return `/rest/v1/ModifiedOrders?FromDate=${w?.from ?? ''}&ToDate=${w?.to ?? ''}`;
    },
    (b, f) => {
      const n = infos(b)?.length ?? 0;
      return n >= 100 && n === f.modifiedWindow?.orders
        ? undefined
        : `expected ${f.modifiedWindow?.orders ?? '≥ 100'} OrderInfos, got ${n}`;
    },
  ),
  // Diagnostic: a page in the middle (OFFSET 499,900).
  ordersListTarget(
    'orders1mDeep',
    'GET /rest/v1/Orders?ItemsPerPage=100&Page=5000 (1M orders, 1 conn)',
    () => '/rest/v1/Orders?ItemsPerPage=100&Page=5000',
    pageOf100,
    true,
  ),
];
