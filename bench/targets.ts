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
  /**
   * Paced load at a share of another target's measured closed-loop rate: measured after the
   * closed-loop rounds (that target is measured too whenever this one is).
   */
  readonly pacedFrom?: { readonly target: string; readonly share: number };
  /**
   * Its server's cost per request falls for thousands of requests after the start (the order
   * targets: per order 7-8 ms of CPU in the first 5-s run after a 2-s warm-up, ~4 ms after 30 s):
   * warmed up at closed loop for BENCH_WARMUP_SLOW seconds, so that the runs measure the steady state.
   */
  readonly slowToWarm?: boolean;
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

/** The absolute rate goal of the voucher redemption (issue 12). */
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

function orderInlineTarget(id: string, label: string, pg: boolean, pacedFrom?: Target['pacedFrom']): Target {
  return {
    id,
    label,
    server: 'certdesk',
    setup: pg ? 'ordersPg' : 'orders',
    slowToWarm: true,
    ...(pg ? { postgres: true } : {}),
    ...(pacedFrom === undefined ? {} : { pacedFrom }),
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

/** The two sizes of the list targets: the latency at 1M orders is compared with the one at 10k. */
type ListSize = '1m' | '10k';

/**
 * GET /Orders and /ModifiedOrders over the seeded orders (one child per size serves all of that
 * size's list targets), one request at a time: the latency of one request.
 */
function ordersListTarget(
  id: string,
  label: string,
  size: ListSize,
  path: (f: Fixtures) => string,
  check: (b: Record<string, unknown>, f: ChildFixtures) => string | undefined,
  o: { optional?: boolean; goal?: Goal } = {},
): Target {
  const setup = size === '1m' ? 'orders1m' : 'orders10k';
  return {
    id,
    label,
    server: 'certdesk',
    setup,
    sharedServer: setup,
    sequential: true,
    ...(o.optional === true ? { optional: true } : {}),
    ...(o.goal === undefined ? {} : { goal: o.goal }),
    request: (f) => ({ method: 'GET', path: path(f), headers: bearer(f) }),
    check: (status, body, f) => okEnvelope(status, body, (b) => check(b, f.child)),
  };
}

const infos = (b: Record<string, unknown>) => (Array.isArray(b.OrderInfos) ? (b.OrderInfos as unknown[]) : undefined);
const itemsAvailable = (b: Record<string, unknown>) =>
  (b._meta as { ItemsAvailable?: unknown } | undefined)?.ItemsAvailable;
/** A full page of 100, and ItemsAvailable counting every seeded order of the customer. */
const pageOf100 = (b: Record<string, unknown>, f: ChildFixtures) => {
  if (infos(b)?.length !== 100) return `expected 100 OrderInfos, got ${infos(b)?.length ?? 'none'}`;
  return itemsAvailable(b) === f.seeded?.orders
    ? undefined
    : `_meta.ItemsAvailable is ${String(itemsAvailable(b))}, expected ${f.seeded?.orders ?? '?'}`;
};
const modifiedWindowPath = (f: Fixtures) => {
  const w = f.child.modifiedWindow;
  return `/rest/v1/ModifiedOrders?FromDate=${w?.from ?? ''}&ToDate=${w?.to ?? ''}`;
};
const modifiedWindowCheck = (b: Record<string, unknown>, f: ChildFixtures) => {
  const n = infos(b)?.length ?? 0;
  return n >= 100 && n === f.modifiedWindow?.orders
    ? undefined
    : `expected ${f.modifiedWindow?.orders ?? '≥ 100'} OrderInfos, got ${n}`;
};
/**
 * CommonName searches for the probe order (present at both sizes): a prefix pattern (the
 * name without its TLD, then `%`) and a suffix pattern (`%` then the registrable name with TLD).
 */
const CN_PATTERNS = {
  prefix: (cn: string) => `${cn.slice(0, cn.lastIndexOf('.') + 1)}%`,
  suffix: (cn: string) => `%${cn.slice(cn.indexOf('.'))}`,
} as const;
const commonNamePath = (kind: keyof typeof CN_PATTERNS) => (f: Fixtures) =>
  `/rest/v1/Orders?ItemsPerPage=100&Page=1&CommonName=${encodeURIComponent(CN_PATTERNS[kind](f.child.probeCommonName ?? 'none'))}`;
/** Exactly the probe order, counted once. */
const probeFound = (b: Record<string, unknown>, f: ChildFixtures) => {
  const found = (infos(b) ?? []) as { CommonName?: unknown }[];
  return found.length === 1 && found[0]!.CommonName === f.probeCommonName && itemsAvailable(b) === 1
    ? undefined
    : `expected the one order ${f.probeCommonName ?? '?'} (ItemsAvailable 1), got ${found.length}, ItemsAvailable ${String(itemsAvailable(b))}`;
};

/** Every list target at both sizes: [1M, 10k]. */
function listTargetsAtBothSizes(): Target[] {
  const sizes: [ListSize, string][] = [
    ['1m', '1M'],
    ['10k', '10k'],
  ];
  return sizes.flatMap(([size, n]) => [
    ordersListTarget(
      `orders${size}`,
      `GET /rest/v1/Orders?ItemsPerPage=100&Page=1 (${n} orders, 1 conn)`,
      size,
      () => '/rest/v1/Orders?ItemsPerPage=100&Page=1',
      pageOf100,
      size === '1m' ? { goal: p99Under(20) } : {},
    ),
    ordersListTarget(
      `modified${size}`,
      `GET /rest/v1/ModifiedOrders (100 of ${n} orders, 1 conn)`,
      size,
      modifiedWindowPath,
      modifiedWindowCheck,
      size === '1m' ? { goal: p99Under(20) } : {},
    ),
    ordersListTarget(
      `cnPrefix${size}`,
      `GET /rest/v1/Orders?CommonName=www.name.% (1 of ${n} orders, 1 conn)`,
      size,
      commonNamePath('prefix'),
      probeFound,
    ),
    ordersListTarget(
      `cnSuffix${size}`,
      `GET /rest/v1/Orders?CommonName=%.name.tld (1 of ${n} orders, 1 conn)`,
      size,
      commonNamePath('suffix'),
      probeFound,
    ),
  ]);
}

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
  },
  // Their goals are ratios to other measurements (bench/goals.ts).
  orderInlineTarget('orderInline', 'POST /rest/v1/Order (FreeDV, DNS proof in place: issued inline)', false),
  orderInlineTarget('orderInlineAtHalf', 'POST /rest/v1/Order inline, paced at half its closed-loop rate', false, {
    target: 'orderInline',
    share: 0.5,
  }),
  orderInlineTarget('orderInlinePg', 'POST /rest/v1/Order inline on PostgreSQL', true),
  {
    id: 'redeemInline',
    label: 'POST /rest/v1/Redeem (FreeDV voucher, DNS proof in place: issued inline)',
    server: 'certdesk',
    setup: 'vouchers',
    slowToWarm: true,
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
  },
  ...listTargetsAtBothSizes(),
  // Diagnostic: a page in the middle (OFFSET 499,900).
  ordersListTarget(
    'orders1mDeep',
    'GET /rest/v1/Orders?ItemsPerPage=100&Page=5000 (1M orders, 1 conn)',
    '1m',
    () => '/rest/v1/Orders?ItemsPerPage=100&Page=5000',
    pageOf100,
    { optional: true },
  ),
];
