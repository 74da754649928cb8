// One measurement against a server child, with exact latencies (autocannon's own histogram has
// 1 ms resolution) and the CPU use of both sides. Closed loop (the default): autocannon in this
// process keeps `connections` requests in flight. Paced (`rate` set): requests start at a fixed
// rate whatever the answers do, over at most `connections` keep-alive sockets, and each latency
// counts from the planned start (so time spent waiting for a free socket counts too). autocannon's
// own `overallRate` is no substitute: it sends each connection's share of a second in one burst.
// Sequential (`sequential` set): one request after the other on one keep-alive connection, the
// last one started always awaited, so that even a route slower than the run gets measured.
import { Agent, request } from 'node:http';
import { cpus } from 'node:os';
import autocannon, { type Instance } from 'autocannon';
import type { ServerChild } from './children.js';
import { percentile } from './stats.js';
import { bodyOf, type RequestSpec } from './targets.js';

export interface LoadOptions {
  readonly durationSeconds: number;
  readonly connections: number;
  /** Requests started per second (paced, open loop); undefined: closed loop. */
  readonly rate?: number;
  /** One request at a time, each awaited (a latency measurement); `connections` is then 1. */
  readonly sequential?: boolean;
}

const TIMEOUT_SECONDS = 10;
/** Sequential runs measure slow routes too (a page sorted from a million rows). */
const SEQUENTIAL_TIMEOUT_SECONDS = 60;

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
  /** The CPU time of the order children's DNS server process over the run, in % of one core (0 without one). */
  readonly dnsCpuPct: number;
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

/** The running autocannon instance or paced run, so that SIGINT can stop it. */
let current: Pick<Instance, 'stop'> | undefined;

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

  const counts =
    options.rate !== undefined
      ? await paced(child, spec, { ...options, rate: options.rate }, latencies)
      : options.sequential === true
        ? await sequential(child, spec, options, latencies)
        : await closedLoop(child, spec, options, latencies);

  const wallMicros = Number(process.hrtime.bigint() - started) / 1000;
  const own = process.cpuUsage(ownBefore);
  const machineMicros = (machineBusyMs() - machineBefore) * 1000;
  const after = await child.usage();
  const sorted = latencies.sorted();
  const eluActive = after.eluActive - before.eluActive;
  const eluTotal = eluActive + (after.eluIdle - before.eluIdle);
  const serverMicros = after.cpuMicros - before.cpuMicros;
  const ownMicros = own.user + own.system;
  const dnsMicros = after.dnsCpuMicros - before.dnsCpuMicros;

  return {
    reqPerSec: counts.requests / counts.seconds,
    requests: counts.requests,
    seconds: counts.seconds,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    non2xx: counts.non2xx,
    errors: counts.errors,
    timeouts: counts.timeouts,
    statusCodes: counts.statusCodes,
    serverCpuPct: (100 * serverMicros) / wallMicros,
    serverEluPct: eluTotal > 0 ? (100 * eluActive) / eluTotal : 0,
    loadgenCpuPct: (100 * ownMicros) / wallMicros,
    dnsCpuPct: (100 * dnsMicros) / wallMicros,
    otherCpuPct: Math.max(0, (100 * (machineMicros - serverMicros - ownMicros - dnsMicros)) / wallMicros),
  };
}

interface Counts {
  /** Completed requests (any status). */
  readonly requests: number;
  readonly seconds: number;
  readonly non2xx: number;
  readonly errors: number;
  readonly timeouts: number;
  readonly statusCodes: Record<string, number>;
}

async function closedLoop(
  child: ServerChild,
  spec: RequestSpec,
  options: LoadOptions,
  latencies: Samples,
): Promise<Counts> {
  const instance = autocannon({
    url: `http://127.0.0.1:${child.port}${spec.path}`,
    method: spec.method,
    headers: spec.headers,
    ...(spec.body === undefined ? {} : { body: spec.body }),
    // A new body per request where the target needs one (setupRequest runs before each request).
    ...(spec.bodies === undefined
      ? {}
      : { requests: [{ setupRequest: (req: Record<string, unknown>) => ({ ...req, body: spec.bodies!() }) }] }),
    connections: options.connections,
    pipelining: 1,
    duration: options.durationSeconds,
    timeout: TIMEOUT_SECONDS,
  });
  current = instance;
  instance.on('response', (_client: unknown, _status: number, _bytes: number, responseTime: number) =>
    latencies.push(responseTime),
  );
  let result;
  try {
    result = await instance;
  } finally {
    current = undefined;
  }
  const statusCodes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(result.statusCodeStats))
    if (!code.startsWith('2')) statusCodes[code] = count;
  return {
    requests: result.requests.total,
    seconds: result.duration,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
  };
}

/**
 * Open loop: request i starts at t0 + i/rate for `durationSeconds`; then the answers still on
 * their way are awaited (each has the usual timeout). req/s = completed / (t0 → last answer).
 */
async function paced(
  child: ServerChild,
  spec: RequestSpec,
  options: LoadOptions & { rate: number },
  latencies: Samples,
): Promise<Counts> {
  const agent = new Agent({ keepAlive: true, maxSockets: options.connections });
  const total = Math.max(1, Math.round(options.rate * options.durationSeconds));
  const intervalNs = 1e9 / options.rate;
  const statusCodes: Record<string, number> = {};
  let completed = 0;
  let non2xx = 0;
  let errors = 0;
  let timeouts = 0;
  let settled = 0;
  let started = 0;
  let stopped = false;
  let lastAnswer = process.hrtime.bigint();
  const t0 = process.hrtime.bigint();

  const fire = (plannedNs: bigint, done: () => void) => {
    void send(child.port, spec, agent, TIMEOUT_SECONDS).then((outcome) => {
      if (outcome.kind === 'answer') {
        completed++;
        lastAnswer = outcome.at;
        latencies.push(Number(outcome.at - plannedNs) / 1e6);
        if (outcome.status < 200 || outcome.status > 299) {
          non2xx++;
          statusCodes[String(outcome.status)] = (statusCodes[String(outcome.status)] ?? 0) + 1;
        }
      } else if (outcome.kind === 'timeout') timeouts++;
      else errors++;
      done();
    });
  };

  await new Promise<void>((resolve) => {
    const done = () => {
      settled++;
      if (settled === started && (started === total || stopped)) resolve();
    };
    current = {
      stop: () => {
        stopped = true;
        if (settled === started) resolve();
      },
    };
    const tick = () => {
      if (stopped) return;
      const now = process.hrtime.bigint();
      while (started < total) {
        const planned = t0 + BigInt(Math.round(started * intervalNs));
        if (planned > now) break;
        started++;
        fire(planned, done);
      }
      if (started < total) {
        const next = t0 + BigInt(Math.round(started * intervalNs));
        setTimeout(tick, Math.max(0, Number(next - process.hrtime.bigint()) / 1e6));
      }
    };
    tick();
  });
  current = undefined;
  agent.destroy();
  const seconds = Math.max(Number(lastAnswer - t0) / 1e9, options.durationSeconds);
  return { requests: completed, seconds, non2xx, errors, timeouts, statusCodes };
}

type Outcome = { kind: 'answer'; status: number; at: bigint } | { kind: 'timeout' } | { kind: 'error' };

/** One request with node:http; `at` is when the whole answer was read. */
function send(port: number, spec: RequestSpec, agent: Agent, timeoutSeconds: number): Promise<Outcome> {
  const text = bodyOf(spec);
  const body = text === undefined ? undefined : Buffer.from(text);
  const headers = { ...spec.headers, ...(body === undefined ? {} : { 'content-length': String(body.length) }) };
  return new Promise((resolve) => {
    let finished = false;
    const finish = (outcome: Outcome) => {
      if (finished) return;
      finished = true;
      resolve(outcome);
    };
    const req = request(
      { host: '127.0.0.1', port, path: spec.path, method: spec.method, headers, agent, timeout: timeoutSeconds * 1000 },
      (res) => {
        res.on('data', () => undefined);
        res.on('end', () => finish({ kind: 'answer', status: res.statusCode ?? 0, at: process.hrtime.bigint() }));
        res.on('error', () => finish({ kind: 'error' }));
      },
    );
    req.on('timeout', () => {
      req.destroy();
      finish({ kind: 'timeout' });
    });
    req.on('error', () => finish({ kind: 'error' }));
    req.end(body);
  });
}

/** One request at a time for `durationSeconds`; the last one started is awaited. */
async function sequential(
  child: ServerChild,
  spec: RequestSpec,
  options: LoadOptions,
  latencies: Samples,
): Promise<Counts> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const statusCodes: Record<string, number> = {};
  let completed = 0;
  let non2xx = 0;
  let errors = 0;
  let timeouts = 0;
  let stopped = false;
  current = {
    stop: () => {
      stopped = true;
    },
  };
  const t0 = process.hrtime.bigint();
  const end = t0 + BigInt(Math.round(options.durationSeconds * 1e9));
  try {
    while (!stopped && process.hrtime.bigint() < end) {
      const start = process.hrtime.bigint();
      const outcome = await send(child.port, spec, agent, SEQUENTIAL_TIMEOUT_SECONDS);
      if (outcome.kind === 'answer') {
        completed++;
        latencies.push(Number(outcome.at - start) / 1e6);
        if (outcome.status < 200 || outcome.status > 299) {
          non2xx++;
          statusCodes[String(outcome.status)] = (statusCodes[String(outcome.status)] ?? 0) + 1;
        }
      } else if (outcome.kind === 'timeout') timeouts++;
      else errors++;
    }
  } finally {
    current = undefined;
    agent.destroy();
  }
  return {
    requests: completed,
    seconds: Number(process.hrtime.bigint() - t0) / 1e9,
    non2xx,
    errors,
    timeouts,
    statusCodes,
  };
}
