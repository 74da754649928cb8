// One measurement: autocannon in this process against a server child, with exact latencies
// (autocannon's own histogram has 1 ms resolution) and the CPU use of both sides.
import { cpus } from 'node:os';
import autocannon, { type Instance } from 'autocannon';
import type { ServerChild } from './children.js';
import { percentile } from './stats.js';
import type { RequestSpec } from './targets.js';

export interface LoadOptions {
  readonly durationSeconds: number;
  readonly connections: number;
}

export interface RunResult {
  readonly reqPerSec: number;
  readonly requests: number;
  readonly seconds: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly non2xx: number;
  readonly errors: number;
  readonly timeouts: number;
  /** Status codes other than 2xx seen, with counts. */
  readonly statusCodes: Record<string, number>;
  /** The server child's CPU time over the run, in % of one core. */
  readonly serverCpuPct: number;
  /** The server's event loop utilization over the run, in %. */
  readonly serverEluPct: number;
  /** This process's (autocannon's) CPU time over the run, in % of one core. */
  readonly loadgenCpuPct: number;
  /**
   * CPU used on the machine by everything else (other processes), in % of one core: high values
   * mean the numbers are disturbed by other work.
   */
  readonly otherCpuPct: number;
}

/** Busy CPU time of the whole machine in ms, summed over cores. */
function machineBusyMs(): number {
  let busy = 0;
  for (const c of cpus()) busy += c.times.user + c.times.nice + c.times.sys + c.times.irq;
  return busy;
}

/** The running autocannon instance, so that SIGINT can stop it. */
let current: Instance | undefined;

export function stopCurrentLoad(): void {
  current?.stop();
}

/** Growable array of latencies in ms. */
class Samples {
  private data = new Float64Array(1 << 16);
  length = 0;

  push(v: number): void {
    if (this.length === this.data.length) {
      const bigger = new Float64Array(this.data.length * 2);
      bigger.set(this.data);
      this.data = bigger;
    }
    this.data[this.length++] = v;
  }

  sorted(): Float64Array {
    return this.data.slice(0, this.length).sort();
  }
}

export async function measure(child: ServerChild, spec: RequestSpec, options: LoadOptions): Promise<RunResult> {
  const latencies = new Samples();
  const before = await child.usage();
  const ownBefore = process.cpuUsage();
  const machineBefore = machineBusyMs();
  const started = process.hrtime.bigint();

  const instance = autocannon({
    url: `http://127.0.0.1:${child.port}${spec.path}`,
    method: spec.method,
    headers: spec.headers,
    ...(spec.body === undefined ? {} : { body: spec.body }),
    connections: options.connections,
    pipelining: 1,
    duration: options.durationSeconds,
    timeout: 10,
  });
  current = instance;
  instance.on('response', (_client: unknown, _status: number, _bytes: number, responseTime: number) => latencies.push(responseTime));
  let result;
  try {
    result = await instance;
  } finally {
    current = undefined;
  }

  const wallMicros = Number(process.hrtime.bigint() - started) / 1000;
  const own = process.cpuUsage(ownBefore);
  const machineMicros = (machineBusyMs() - machineBefore) * 1000;
  const after = await child.usage();
  const sorted = latencies.sorted();
  const statusCodes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(result.statusCodeStats)) if (!code.startsWith('2')) statusCodes[code] = count;
  const eluActive = after.eluActive - before.eluActive;
  const eluTotal = eluActive + (after.eluIdle - before.eluIdle);
  const serverMicros = after.cpuMicros - before.cpuMicros;
  const ownMicros = own.user + own.system;

  return {
    reqPerSec: result.requests.total / result.duration,
    requests: result.requests.total,
    seconds: result.duration,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
    serverCpuPct: (100 * serverMicros) / wallMicros,
    serverEluPct: eluTotal > 0 ? (100 * eluActive) / eluTotal : 0,
    loadgenCpuPct: (100 * ownMicros) / wallMicros,
    otherCpuPct: Math.max(0, (100 * (machineMicros - serverMicros - ownMicros)) / wallMicros),
  };
}
