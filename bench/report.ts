// The summary of a benchmark: the table printed at the end and bench/results.json.
import { renameSync, writeFileSync } from 'node:fs';
import type { RunResult } from './load.js';
import { median, round } from './stats.js';
import type { Target } from './targets.js';

/** Other processes using this much of a core (%) during a run disturb it. */
export const DISTURBED_PCT = 15;

export interface TargetSummary {
  readonly label: string;
  readonly method: string;
  readonly path: string;
  /** Closed loop: requests in flight; paced: at most this many sockets. */
  readonly connections: number;
  /** Paced load: requests started per second; null: closed loop. */
  readonly pacedRatePerSec: number | null;
  readonly runsReqPerSec: number[];
  readonly medianReqPerSec: number;
  readonly medianP50Ms: number;
  readonly medianP99Ms: number;
  /** Totals over the measured runs (warm-up excluded; a warm-up failure stops the bench). */
  readonly non2xx: number;
  readonly errors: number;
  readonly timeouts: number;
  readonly statusCodes: Record<string, number>;
  readonly ratioToBaseline: number;
  readonly medianServerCpuPct: number;
  readonly medianServerEluPct: number;
  readonly medianLoadgenCpuPct: number;
  readonly medianDnsCpuPct: number;
  readonly medianOtherCpuPct: number;
  /** Runs (1-based) during which other processes used ≥ DISTURBED_PCT % of a core. */
  readonly disturbedRuns: number[];
  readonly goal: { readonly text: string; readonly met: boolean } | null;
  readonly runs: RunResult[];
}

export function summarizeTarget(
  target: Target,
  path: string,
  method: string,
  runs: RunResult[],
  baselineReqPerSec: number,
  connections: number,
  pacedRatePerSec: number | undefined,
): TargetSummary {
  const medianReqPerSec = median(runs.map((r) => r.reqPerSec));
  const medianP99Ms = median(runs.map((r) => r.p99Ms));
  const ratioToBaseline = medianReqPerSec / baselineReqPerSec;
  const statusCodes: Record<string, number> = {};
  for (const r of runs)
    for (const [code, n] of Object.entries(r.statusCodes)) statusCodes[code] = (statusCodes[code] ?? 0) + n;
  return {
    label: target.label,
    method,
    path,
    connections,
    pacedRatePerSec: pacedRatePerSec ?? null,
    runsReqPerSec: runs.map((r) => round(r.reqPerSec, 1)),
    medianReqPerSec: round(medianReqPerSec, 1),
    medianP50Ms: round(median(runs.map((r) => r.p50Ms)), 3),
    medianP99Ms: round(medianP99Ms, 3),
    non2xx: runs.reduce((n, r) => n + r.non2xx, 0),
    errors: runs.reduce((n, r) => n + r.errors, 0),
    timeouts: runs.reduce((n, r) => n + r.timeouts, 0),
    statusCodes,
    ratioToBaseline: round(ratioToBaseline, 4),
    medianServerCpuPct: round(median(runs.map((r) => r.serverCpuPct)), 1),
    medianServerEluPct: round(median(runs.map((r) => r.serverEluPct)), 1),
    medianLoadgenCpuPct: round(median(runs.map((r) => r.loadgenCpuPct)), 1),
    medianDnsCpuPct: round(median(runs.map((r) => r.dnsCpuPct)), 1),
    medianOtherCpuPct: round(median(runs.map((r) => r.otherCpuPct)), 1),
    disturbedRuns: runs.flatMap((r, i) => (r.otherCpuPct >= DISTURBED_PCT ? [i + 1] : [])),
    goal:
      target.goal === undefined
        ? null
        : { text: target.goal.text, met: target.goal.met({ medianReqPerSec, ratioToBaseline, medianP99Ms }) },
    runs: runs.map((r) => ({
      ...r,
      reqPerSec: round(r.reqPerSec, 1),
      p50Ms: round(r.p50Ms, 3),
      p99Ms: round(r.p99Ms, 3),
      serverCpuPct: round(r.serverCpuPct, 1),
      serverEluPct: round(r.serverEluPct, 1),
      loadgenCpuPct: round(r.loadgenCpuPct, 1),
      dnsCpuPct: round(r.dnsCpuPct, 1),
      otherCpuPct: round(r.otherCpuPct, 1),
    })),
  };
}

const int = (n: number) => Math.round(n).toLocaleString('en-US');
/** req/s: whole numbers, one decimal below 10 (a route slower than the run). */
const rate = (n: number) => (n < 10 ? n.toFixed(1) : int(n));

/** The results table, one row per target. */
export function formatTable(summaries: Record<string, TargetSummary>): string {
  const header = [
    'target',
    'load',
    'req/s (median)',
    'runs (req/s)',
    'p50 ms',
    'p99 ms',
    'non-2xx/err',
    'vs baseline',
    'server CPU',
    'loadgen CPU',
    'other CPU',
    'goal',
  ];
  const rows = Object.values(summaries).map((s) => [
    s.label,
    s.pacedRatePerSec === null ? `${s.connections} conn` : `${s.pacedRatePerSec}/s paced`,
    rate(s.medianReqPerSec),
    s.runsReqPerSec.map(rate).join(' '),
    s.medianP50Ms.toFixed(2),
    s.medianP99Ms.toFixed(2),
    `${s.non2xx}/${s.errors + s.timeouts}`,
    `${(100 * s.ratioToBaseline).toFixed(1)} %`,
    `${s.medianServerCpuPct.toFixed(0)} %`,
    `${s.medianLoadgenCpuPct.toFixed(0)} %`,
    `${s.medianOtherCpuPct.toFixed(0)} %`,
    s.goal === null ? '' : `${s.goal.text}: ${s.goal.met ? 'met' : 'MISSED'}`,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const numeric = new Set([1, 2, 4, 5, 6, 7, 8, 9, 10]);
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (numeric.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join(' │ ')
      .trimEnd();
  return [line(header), widths.map((w) => '─'.repeat(w)).join('─┼─'), ...rows.map(line)].join('\n');
}

/** Writes JSON atomically (a reader never sees half a file). */
export function writeJson(file: string, value: unknown): void {
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(value, null, 2)}\n`);
  renameSync(tmp, file);
}
