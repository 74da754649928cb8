// What is measured: the baseline and the certdesk routes of the issue, with their goals.
import type { ServerKind } from './protocol.js';

export interface Goal {
  /** Shown in the table, e.g. "≥ 50 % of baseline". */
  readonly text: string;
  met(result: { medianReqPerSec: number; ratioToBaseline: number }): boolean;
}

/** What a request needs from the setup: the bearer token and the CSR made by openssl. */
export interface Fixtures {
  readonly token: string;
  readonly csrPem: string;
  /** GET path of an OCSP request for a leaf the certdesk server issued. */
  readonly ocspPath: string;
}

export interface RequestSpec {
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body?: string;
}

export interface Target {
  readonly id: string;
  readonly label: string;
  readonly server: ServerKind;
  request(f: Fixtures): RequestSpec;
  /** Whether one response is the real thing (checked before and after the runs). */
  check(status: number, body: unknown): string | undefined;
  readonly goal?: Goal;
  /** Diagnostic target: measured only when BENCH_TARGETS names it. */
  readonly optional?: boolean;
}

const QUOTE_QUERY = 'ProductCode=TrustPoint.DV&ValidityPeriod=12&ServerCount=1&SubjectAltNameCount=0';

function okEnvelope(status: number, body: unknown, extra: (b: Record<string, unknown>) => string | undefined): string | undefined {
  if (status !== 200) return `HTTP ${status}: ${JSON.stringify(body)}`;
  if (typeof body !== 'object' || body === null) return `not a JSON object: ${JSON.stringify(body)}`;
  const b = body as Record<string, unknown>;
  if (b.success !== true) return `success is not true: ${JSON.stringify(body)}`;
  return extra(b);
}

const bearer = (f: Fixtures) => ({ authorization: `Bearer ${f.token}` });

export const TARGETS: readonly Target[] = [
  {
    id: 'baseline',
    label: 'baseline (bare Fastify GET /)',
    server: 'baseline',
    request: () => ({ method: 'GET', path: '/', headers: {} }),
    check: (status, body) =>
      status === 200 && (body as { hello?: unknown } | null)?.hello === 'world' ? undefined : `HTTP ${status}: ${JSON.stringify(body)}`,
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
    id: 'profile',
    label: 'GET /rest/v1/Profile',
    server: 'certdesk',
    request: (f) => ({ method: 'GET', path: '/rest/v1/Profile', headers: bearer(f) }),
    check: (status, body) => okEnvelope(status, body, (b) => (typeof b.CustomerID === 'number' ? undefined : 'no CustomerID')),
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
      okEnvelope(status, body, (b) => ((b.ParsedCSR as { KeyLength?: unknown } | undefined)?.KeyLength === 2048 ? undefined : 'ParsedCSR.KeyLength is not 2048')),
    goal: { text: '≥ 2,000 req/s', met: (r) => r.medianReqPerSec >= 2000 },
  },
  {
    id: 'ocsp',
    label: 'GET /ocsp/<request> (cached signed response)',
    server: 'certdesk',
    request: (f) => ({ method: 'GET', path: f.ocspPath, headers: {} }),
    // The body is DER (read here as text): a successful OCSPResponse is far longer than an error one (5 bytes).
    check: (status, body) => (status === 200 && typeof body === 'string' && body.length > 100 ? undefined : `HTTP ${status}, ${typeof body === 'string' ? body.length : 0} bytes`),
    goal: { text: '≥ 5,000 req/s', met: (r) => r.medianReqPerSec >= 5000 },
  },
];
