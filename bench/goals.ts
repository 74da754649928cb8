// The goals that compare one measurement with another of the same run (issue 15): the machines
// vary by a factor of four from day to day, so only ratios and growth are goals. Evaluated once
// every target and the CA part are measured; a goal whose measurements are missing (BENCH_TARGETS
// left them out) is reported as not measured.
import type { CaBenchResult } from './ca.js';
import type { TargetSummary } from './report.js';

export interface GoalContext {
  readonly targets: Readonly<Record<string, TargetSummary>>;
  readonly ca?: CaBenchResult;
}

export interface GoalResult {
  readonly id: string;
  readonly what: string;
  /** The measurement and what it is compared with, as printed. */
  readonly measured: string;
  readonly reference: string;
  /** measured / reference (a growth: p99 at 1M / p99 at 10k); null when not measured. */
  readonly ratio: number | null;
  readonly goal: string;
  readonly met: boolean | null;
}

interface RatioGoal {
  readonly id: string;
  readonly what: string;
  readonly goal: string;
  evaluate(c: GoalContext): Omit<GoalResult, 'id' | 'what' | 'goal'> | undefined;
}

const int = (n: number) => Math.round(n).toLocaleString('en-US');
const perSec = (s: TargetSummary) => `${int(s.medianReqPerSec)}/s`;
const ms = (n: number) => `${n.toFixed(2)} ms`;

/** Throughput of `id` as a share of `ref`'s, at least `min`. */
function throughputShare(id: string, what: string, ref: string, refName: string, min: number): RatioGoal {
  return {
    id,
    what,
    goal: `≥ ${Math.round(min * 100)} %`,
    evaluate: ({ targets }) => {
      const s = targets[id];
      const r = targets[ref];
      if (s === undefined || r === undefined) return undefined;
      const ratio = s.medianReqPerSec / r.medianReqPerSec;
      return { measured: perSec(s), reference: `${refName} ${perSec(r)}`, ratio, met: ratio >= min };
    },
  };
}

/** p99 at 1M orders over p99 at 10k orders (one request at a time), at most `max`. */
function growth(base: string, what: string, max: number): RatioGoal {
  return {
    id: `${base}1m`,
    what,
    goal: `≤ ${max}× (p99 at 1M / at 10k)`,
    evaluate: ({ targets }) => {
      const big = targets[`${base}1m`];
      const small = targets[`${base}10k`];
      if (big === undefined || small === undefined) return undefined;
      const ratio = big.medianP99Ms / small.medianP99Ms;
      return {
        measured: `p99 ${ms(big.medianP99Ms)} at 1M`,
        reference: `p99 ${ms(small.medianP99Ms)} at 10k`,
        ratio,
        met: ratio <= max,
      };
    },
  };
}

export const GOALS: readonly RatioGoal[] = [
  throughputShare('getOrder', 'GET /Order/{id}', 'baseline', 'baseline', 0.5),
  growth('orders', 'GET /Orders?ItemsPerPage=100 with ItemsAvailable', 1.5),
  growth('modified', 'GET /ModifiedOrders', 1.5),
  growth('cnPrefix', 'GET /Orders?CommonName=www.name.%', 1.5),
  growth('cnSuffix', 'GET /Orders?CommonName=%.name.tld', 1.5),
  {
    id: 'orderInline',
    what: 'POST /Order, issued inline (SQLite)',
    goal: '≥ 40 % of the CA with the same key',
    evaluate: ({ targets, ca }) => {
      const s = targets.orderInline;
      const rsa = ca?.issuance.rsa;
      if (s === undefined || rsa === undefined) return undefined;
      const ratio = s.medianReqPerSec / rsa.issuedPerSec;
      return {
        measured: perSec(s),
        reference: `CA issuance ${int(rsa.issuedPerSec)}/s (${rsa.caKey})`,
        ratio,
        met: ratio >= 0.4,
      };
    },
  },
  {
    id: 'orderInlineAtHalf',
    what: 'POST /Order inline, paced at half its closed-loop rate',
    goal: 'p99 < 100 ms, and the pace kept (≥ 97 %)',
    evaluate: ({ targets }) => {
      const s = targets.orderInlineAtHalf;
      if (s === undefined || s.pacedRatePerSec === null) return undefined;
      const ratio = s.medianReqPerSec / s.pacedRatePerSec;
      return {
        measured: `p99 ${ms(s.medianP99Ms)}, ${perSec(s)} answered`,
        reference: `paced at ${int(s.pacedRatePerSec)}/s`,
        ratio,
        met: s.medianP99Ms < 100 && ratio >= 0.97,
      };
    },
  },
  throughputShare('orderInlinePg', 'POST /Order inline on PostgreSQL', 'orderInline', 'SQLite', 0.8),
  {
    id: 'caEcdsa',
    what: 'ECDSA issuance (BuiltinCa.issue)',
    goal: '≥ 30 % of raw signatures',
    evaluate: ({ ca }) => {
      const e = ca?.issuance.ecdsa;
      if (e === undefined) return undefined;
      return {
        measured: `${int(e.issuedPerSec)}/s`,
        reference: `raw signatures ${int(e.rawSignPerSec)}/s (${e.caKey}); ratio: median of the rounds'`,
        ratio: e.ratio,
        met: e.ratio >= 0.3,
      };
    },
  },
  throughputShare('ocsp', 'OCSP from the cached response', 'baseline', 'baseline', 0.5),
];

export function evaluateGoals(c: GoalContext): GoalResult[] {
  return GOALS.map((g) => {
    const r = g.evaluate(c);
    return r === undefined
      ? { id: g.id, what: g.what, goal: g.goal, measured: 'not measured', reference: '', ratio: null, met: null }
      : { id: g.id, what: g.what, goal: g.goal, ...r };
  });
}

export function formatGoals(results: readonly GoalResult[]): string {
  const rows = [
    ['goal', 'measured', 'compared with', 'ratio', 'goal', 'met'],
    ...results.map((r) => [
      r.what,
      r.measured,
      r.reference,
      r.ratio === null
        ? ''
        : r.ratio >= 1.5 || r.id.endsWith('1m')
          ? `${r.ratio.toFixed(2)}×`
          : `${(100 * r.ratio).toFixed(1)} %`,
      r.goal,
      r.met === null ? '—' : r.met ? 'yes' : 'NO',
    ]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  return rows
    .map((row) =>
      row
        .map((c, i) => c.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
