// `npm run bench`: load benchmarks of certdesk against a bare Fastify baseline.
// Each server runs in its own child process (bench/server.ts); autocannon runs here. Every
// target is warmed up, then measured BENCH_RUNS times, the targets taking turns round by round.
// Prints a table and writes bench/results.json. Exit 0 when the measurement is sound (goals
// missed or not), 1 when it is broken (a non-2xx response, a socket error, a crashed server).
// See bench/README.md.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ServerChild, killAllNow, terminateAll } from './children.js';
import { measure, stopCurrentLoad, type LoadOptions, type RunResult } from './load.js';
import { summarizeFile } from './profile-summary.js';
import { formatCaTable, runCaBench } from './ca.js';
import { DISTURBED_PCT, formatTable, summarizeTarget, writeJson, type TargetSummary } from './report.js';
import { median, round } from './stats.js';
import { TARGETS, benchDatabaseUrl, bodyOf, type Fixtures, type RequestSpec, type Target } from './targets.js';
import { evaluateGoals, formatGoals } from './goals.js';
import type { ChildFixtures } from './protocol.js';

const BENCH_DIR = fileURLToPath(new URL('.', import.meta.url));
const RESULTS_FILE = join(BENCH_DIR, 'results.json');
const PROFILE_DIR = join(BENCH_DIR, 'profiles');

class BenchBroken extends Error {}

const int = (n: number) => Math.round(n).toLocaleString('en-US');

interface Settings {
  readonly durationSeconds: number;
  readonly runs: number;
  readonly warmupSeconds: number;
  /** The closed-loop warm-up of the targets that are slow to warm (`Target.slowToWarm`). */
  readonly slowWarmupSeconds: number;
  readonly connections: number;
  readonly targets: readonly Target[];
  readonly profile: boolean;
  /** Pin autocannon to CPU 0 and the servers to CPU 1 (taskset): less scheduler noise on 2 cores. */
  readonly pin: boolean;
}

function numberEnv(name: string, fallback: number, integer: boolean): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) {
    throw new BenchBroken(`${name} must be a positive ${integer ? 'integer' : 'number'}, got ${raw}`);
  }
  return n;
}

function flagEnv(name: string): boolean {
  return ['1', 'true', 'yes'].includes((process.env[name] ?? '').trim().toLowerCase());
}

/**
 * A child's fixtures as results.json keeps them: the facts of its setup, named one by one, so that
 * its API client's secret, its sign-in password, its voucher codes and any secret a setup adds
 * later stay out. They belong to a throwaway instance, but a committed file is no place for secrets.
 */
function publicFixtures(f: ChildFixtures): Partial<ChildFixtures> {
  const { ocspPath, orderId, database, seeded, modifiedWindow, probeCommonName } = f;
  return { ocspPath, orderId, database, seeded, modifiedWindow, probeCommonName };
}

/** Sets the CPU affinity of every thread of a process (Linux `taskset`). */
function pinProcess(pid: number, cpu: number): void {
  try {
    execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { stdio: 'ignore' });
  } catch (e) {
    throw new BenchBroken(`BENCH_PIN: taskset failed for pid ${pid} (${(e as Error).message})`);
  }
}

function readSettings(): Settings {
  const wanted = (process.env.BENCH_TARGETS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = wanted.filter((w) => !TARGETS.some((t) => t.id === w));
  if (unknown.length > 0)
    throw new BenchBroken(
      `BENCH_TARGETS: unknown ${unknown.join(', ')} (known: ${TARGETS.map((t) => t.id).join(', ')})`,
    );
  const pg = benchDatabaseUrl() !== undefined;
  const pgWanted = TARGETS.filter((t) => t.postgres === true && wanted.includes(t.id)).map((t) => t.id);
  if (!pg && pgWanted.length > 0)
    throw new BenchBroken(
      `BENCH_TARGETS: ${pgWanted.join(', ')} need CERTDESK_BENCH_DATABASE_URL (or CERTDESK_TEST_DATABASE_URL)`,
    );
  // The baseline is always measured: every ratio is relative to it. PostgreSQL targets run when a
  // server is named. A paced target brings the target whose rate sets its pace.
  const pacers = TARGETS.filter((t) => wanted.includes(t.id)).flatMap((t) => t.pacedFrom?.target ?? []);
  const targets =
    wanted.length === 0
      ? TARGETS.filter((t) => t.optional !== true && (t.postgres !== true || pg))
      : TARGETS.filter((t) => t.id === 'baseline' || wanted.includes(t.id) || pacers.includes(t.id));
  return {
    durationSeconds: numberEnv('BENCH_DURATION', 5, false),
    runs: numberEnv('BENCH_RUNS', 5, true),
    warmupSeconds: numberEnv('BENCH_WARMUP', 2, false),
    slowWarmupSeconds: numberEnv('BENCH_WARMUP_SLOW', 20, false),
    connections: numberEnv('BENCH_CONNECTIONS', 50, true),
    targets,
    profile: flagEnv('BENCH_PROFILE'),
    pin: flagEnv('BENCH_PIN'),
  };
}

/** An RSA-2048 CSR made once by the openssl CLI. */
function makeCsr(): string {
  const dir = mkdtempSync(join(tmpdir(), 'certdesk-bench-csr-'));
  try {
    const name = 'www.certdesk-bench.com';
    execFileSync(
      'openssl',
      [
        'req',
        '-new',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'csr.pem'),
        '-subj',
        `/C=DE/ST=Berlin/L=Berlin/O=Certdesk Bench/CN=${name}`,
        '-addext',
        `subjectAltName=DNS:${name},DNS:certdesk-bench.com`,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    return readFileSync(join(dir, 'csr.pem'), 'utf8');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A real client_credentials grant at POST /oauth2/token (form body, as the README shows). */
async function getToken(child: ServerChild): Promise<string> {
  if (child.credentials === undefined) throw new BenchBroken(`server ${child.name} has no API client`);
  const res = await fetch(`http://127.0.0.1:${child.port}/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: child.credentials.clientId,
      client_secret: child.credentials.clientSecret,
    }),
  });
  const body = (await res.json()) as { access_token?: string };
  if (res.status !== 200 || typeof body.access_token !== 'string') {
    throw new BenchBroken(`POST /oauth2/token on ${child.name}: HTTP ${res.status} ${JSON.stringify(body)}`);
  }
  return body.access_token;
}

/** One request with fetch, checked by the target: the benchmark must measure real answers. */
async function checkOnce(
  target: Target,
  child: ServerChild,
  spec: RequestSpec,
  fixtures: Fixtures,
  when: string,
): Promise<void> {
  const res = await fetch(`http://127.0.0.1:${child.port}${spec.path}`, {
    method: spec.method,
    // The answer itself, as the load generator sees it: a redirect is not followed.
    redirect: 'manual',
    headers: spec.headers,
    ...(bodyOf(spec) === undefined ? {} : { body: bodyOf(spec) }),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // keep the text for the message
  }
  const problem = target.check(res.status, body, fixtures);
  if (problem !== undefined) throw new BenchBroken(`${target.label} (${when}): ${problem}`);
}

function brokenReason(target: Target, r: RunResult, child: ServerChild): string | undefined {
  if (child.crashed) return child.exitReason;
  // A target whose success is not a 2xx (a sign-in's 303) counts only the other statuses as failures.
  const unexpected =
    target.okStatus === undefined
      ? r.non2xx
      : Object.entries(r.statusCodes).reduce(
          (n, [code, count]) => (code === String(target.okStatus) ? n : n + count),
          0,
        );
  if (unexpected > 0 || r.errors > 0 || r.timeouts > 0) {
    return `${target.label}: ${r.non2xx} non-2xx ${JSON.stringify(r.statusCodes)}, ${r.errors} errors, ${r.timeouts} timeouts`;
  }
  if (r.requests === 0) return `${target.label}: no request completed`;
  return undefined;
}

function gitRevision(): string | null {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
    const dirty =
      execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }).trim() !== '';
    return dirty ? `${head}+modified` : head;
  } catch {
    return null;
  }
}

const fmt = (r: RunResult) =>
  `${Math.round(r.reqPerSec).toString().padStart(6)} req/s  p50 ${r.p50Ms.toFixed(2)} ms  p99 ${r.p99Ms.toFixed(2)} ms  ` +
  `server CPU ${r.serverCpuPct.toFixed(0)} %  loadgen CPU ${r.loadgenCpuPct.toFixed(0)} %  other CPU ${r.otherCpuPct.toFixed(0)} %` +
  (r.dnsCpuPct > 0 ? `  DNS server CPU ${r.dnsCpuPct.toFixed(0)} %` : '') +
  (r.non2xx + r.errors + r.timeouts > 0 ? `  non-2xx ${r.non2xx} errors ${r.errors} timeouts ${r.timeouts}` : '');

let shuttingDown = false;
let interrupted = false;

async function main(): Promise<number> {
  const settings = readSettings();
  const loadAtStart = loadavg().map((l) => round(l, 2));
  const log = (s: string) => process.stdout.write(`${s}\n`);
  log(
    `certdesk bench: node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? 'unknown'}); ` +
      `${settings.runs} run(s) × ${settings.durationSeconds} s per target after ${settings.warmupSeconds} s warm-up ` +
      `(${settings.slowWarmupSeconds} s for the order targets); ` +
      `${settings.connections} connections, pipelining 1${settings.pin ? '; autocannon pinned to CPU 0, servers to CPU 1' : ''}` +
      `${settings.profile ? '; CPU profiling ON (slower)' : ''}`,
  );

  if (settings.pin) {
    if (cpus().length < 2) throw new BenchBroken('BENCH_PIN needs at least 2 CPUs');
    pinProcess(process.pid, 0);
  }
  const csrPem = makeCsr();
  const plan: { target: Target; child: ServerChild; spec: RequestSpec; fixtures: Fixtures }[] = [];
  /** One child per target, except targets that share one (the 1M-order database is seeded once). */
  const shared = new Map<string, { child: ServerChild; token: string }>();
  const childrenStarted: ServerChild[] = [];
  for (const target of settings.targets) {
    let started = target.sharedServer === undefined ? undefined : shared.get(target.sharedServer);
    if (started === undefined) {
      const name = target.sharedServer ?? target.id;
      if (target.setup === 'orders1m') log(`  starting ${name} server: seeding 1,000,000 orders (about a minute)…`);
      if (target.setup === 'orders10k') log(`  starting ${name} server: seeding 10,000 orders…`);
      const child = await ServerChild.start(name, target.server, target.setup ?? 'plain', csrPem);
      started = { child, token: target.server === 'certdesk' ? await getToken(child) : '' };
      if (target.sharedServer !== undefined) shared.set(target.sharedServer, started);
      childrenStarted.push(child);
      if (settings.pin && child.pid !== undefined) pinProcess(child.pid, 1);
      const seeded = child.fixtures.seeded;
      log(
        `  started ${name} server (pid ${String(child.pid)}, port ${child.port}${settings.pin ? ', CPU 1' : ''}` +
          `${target.setup === undefined || target.setup === 'plain' ? '' : `, setup ${target.setup} on ${child.fixtures.database ?? '?'}`})` +
          (seeded === undefined
            ? ''
            : `: seeded ${seeded.orders.toLocaleString('en-US')} orders and ${seeded.names.toLocaleString('en-US')} names in ${seeded.seconds} s` +
              ` (database ${(seeded.dbBytes / 1e9).toFixed(2)} GB); ModifiedOrders window ${child.fixtures.modifiedWindow?.from ?? '?'} – ${child.fixtures.modifiedWindow?.to ?? '?'} holds ${child.fixtures.modifiedWindow?.orders ?? '?'} orders`),
      );
    }
    const { child, token } = started;
    const fixtures: Fixtures = { csrPem, token, child: child.fixtures };
    const spec = target.request(fixtures);
    await checkOnce(target, child, spec, fixtures, 'before the runs');
    plan.push({ target, child, spec, fixtures });
  }

  const connectionsOf = (target: Target) => (target.sequential === true ? 1 : settings.connections);
  /** The pace of targets paced at a share of another's measured rate (set after the closed-loop rounds). */
  const paces = new Map<string, number>();
  const rateOf = (target: Target) => target.rate ?? paces.get(target.id);
  const load = (target: Target, durationSeconds: number): LoadOptions => ({
    durationSeconds,
    connections: connectionsOf(target),
    ...(rateOf(target) === undefined ? {} : { rate: rateOf(target)! }),
    ...(target.sequential === true ? { sequential: true } : {}),
  });
  const guard = (target: Target, child: ServerChild, r: RunResult) => {
    const reason = brokenReason(target, r, child);
    if (reason !== undefined) throw new BenchBroken(reason);
  };

  const closedLoop = plan.filter((p) => p.target.pacedFrom === undefined);
  const pacedLater = plan.filter((p) => p.target.pacedFrom !== undefined);
  // Every target is warmed up now, at closed loop (a paced one has no pace yet): those slow to warm
  // for longer. A paced target is warmed up again at its pace before its runs.
  for (const { target, child, spec } of plan) {
    const seconds = target.slowToWarm === true ? settings.slowWarmupSeconds : settings.warmupSeconds;
    const r = await measure(child, spec, load(target, seconds));
    log(`warm-up   ${target.id.padEnd(18)} ${fmt(r)}${seconds === settings.warmupSeconds ? '' : ` (${seconds} s)`}`);
    guard(target, child, r);
  }

  if (settings.profile) {
    mkdirSync(PROFILE_DIR, { recursive: true });
    for (const child of childrenStarted) await child.startProfile();
  }

  const results = new Map<string, RunResult[]>(plan.map((p) => [p.target.id, []]));
  for (let round = 0; round < settings.runs; round++) {
    // Rotate the order each round so that no target always follows the same one.
    for (let i = 0; i < closedLoop.length; i++) {
      const { target, child, spec } = closedLoop[(round + i) % closedLoop.length]!;
      const r = await measure(child, spec, load(target, settings.durationSeconds));
      log(`run ${round + 1}/${settings.runs} ${target.id.padEnd(18)} ${fmt(r)}`);
      guard(target, child, r);
      results.get(target.id)!.push(r);
    }
  }
  // Paced at a share of a rate measured above: warmed up and measured now, at that pace.
  for (const { target, child, spec } of pacedLater) {
    const from = target.pacedFrom!;
    const pace = Math.max(1, Math.round(from.share * median(results.get(from.target)!.map((r) => r.reqPerSec))));
    paces.set(target.id, pace);
    log(`${target.id}: paced at ${pace}/s (${Math.round(from.share * 100)} % of ${from.target}'s median)`);
    const warm = await measure(child, spec, load(target, settings.warmupSeconds));
    log(`warm-up   ${target.id.padEnd(18)} ${fmt(warm)}`);
    guard(target, child, warm);
    for (let round = 0; round < settings.runs; round++) {
      const r = await measure(child, spec, load(target, settings.durationSeconds));
      log(`run ${round + 1}/${settings.runs} ${target.id.padEnd(18)} ${fmt(r)}`);
      guard(target, child, r);
      results.get(target.id)!.push(r);
    }
  }

  const profiles: [string, string][] = [];
  if (settings.profile) {
    for (const child of childrenStarted) {
      // A shared child's profile covers every target it served.
      const file = join(PROFILE_DIR, `${child.name}.cpuprofile`);
      await child.stopProfile(file);
      profiles.push([child.name, file]);
    }
  }
  for (const { target, child, spec, fixtures } of plan)
    await checkOnce(target, child, spec, fixtures, 'after the runs');
  shuttingDown = true;
  await terminateAll();

  const baselineReqPerSec = median(results.get('baseline')!.map((r) => r.reqPerSec));
  const summaries: Record<string, TargetSummary> = {};
  for (const { target, spec } of plan) {
    summaries[target.id] = summarizeTarget(
      target,
      spec.path,
      spec.method,
      results.get(target.id)!,
      baselineReqPerSec,
      connectionsOf(target),
      rateOf(target),
    );
  }

  log('');
  log(formatTable(summaries));
  const saturated = Object.entries(summaries)
    .filter(([, s]) => s.medianLoadgenCpuPct >= 90)
    .map(([id]) => id);
  if (saturated.length > 0) {
    log(`note: autocannon used ≥ 90 % of a core on ${saturated.join(', ')}: the load generator may cap those numbers.`);
  }
  // PostgreSQL runs on this machine too: its CPU is "other CPU" of the …Pg targets, not a disturbance.
  const pgIds = new Set(plan.filter((p) => p.target.postgres === true).map((p) => p.target.id));
  const disturbed = Object.entries(summaries).filter(([id, s]) => s.disturbedRuns.length > 0 && !pgIds.has(id));
  if (disturbed.length > 0) {
    log(
      `note: other processes used ≥ ${DISTURBED_PCT} % of a core during ${disturbed.map(([id, s]) => `${id} run ${s.disturbedRuns.join(', ')}`).join('; ')}` +
        ` (load average now ${loadavg()
          .map((l) => l.toFixed(2))
          .join(' ')}): ` +
        (disturbed.some(([, s]) => s.medianOtherCpuPct >= DISTURBED_PCT)
          ? 'medians are disturbed; rerun on a quiet machine.'
          : 'the medians should be sound.'),
    );
  }
  if (pgIds.size > 0)
    log(`note: "other CPU" of ${[...pgIds].join(', ')} is mostly the PostgreSQL server on this machine.`);
  const orderLine = (id: string, paced?: string) => {
    const s = summaries[id];
    const p = paced === undefined ? undefined : summaries[paced];
    if (s === undefined && p === undefined) return undefined;
    return (
      `${s === undefined ? '' : `${int(s.medianReqPerSec)} req/s (p99 ${s.medianP99Ms.toFixed(1)} ms at ${s.connections} conn)`}` +
      `${s !== undefined && p !== undefined ? ', ' : ''}${p === undefined ? '' : `p99 ${p.medianP99Ms.toFixed(1)} ms at ${p.pacedRatePerSec ?? '?'}/s`}`
    );
  };
  const sqliteOrders = orderLine('orderInline', 'orderInlineAtHalf');
  const pgOrders = orderLine('orderInlinePg');
  if (sqliteOrders !== undefined || pgOrders !== undefined) {
    log(
      `POST /Order issued inline: SQLite ${sqliteOrders ?? 'not measured'} | PostgreSQL ${pgOrders ?? 'not measured (set CERTDESK_BENCH_DATABASE_URL)'}`,
    );
  }
  const missed = Object.values(summaries).filter((s) => s.goal !== null && !s.goal.met);
  log(
    missed.length === 0
      ? 'all goals met'
      : `goals missed: ${missed.map((s) => `${s.label} (${s.goal!.text})`).join('; ')}`,
  );

  log('');
  const ca = await runCaBench(log, { runs: settings.runs, seconds: settings.durationSeconds });
  log('');
  log(formatCaTable(ca));
  const caMissed = [
    ...Object.values(ca.issuance)
      .filter((x) => !x.met)
      .map((x) => `issuance with ${x.caKey} (${x.goal})`),
    ...(ca.crl100k.met ? [] : ['CRL of 100,000 entries (< 2 s)']),
  ];
  log(caMissed.length === 0 ? 'all CA goals met' : `CA goals missed: ${caMissed.join('; ')}`);

  // The goals that compare measurements of this run with each other.
  const goals = evaluateGoals({ targets: summaries, ca });
  log('');
  log(formatGoals(goals));
  const goalsMissed = goals.filter((g) => g.met === false).map((g) => `${g.what} (${g.goal})`);
  log(goalsMissed.length === 0 ? 'all ratio goals met' : `ratio goals missed: ${goalsMissed.join('; ')}`);

  const output = {
    date: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? null,
    platform: `${process.platform} ${process.arch}`,
    loadAverageAtStart: loadAtStart,
    loadAverageAtEnd: loadavg().map((l) => round(l, 2)),
    git: gitRevision(),
    settings: {
      durationSeconds: settings.durationSeconds,
      runs: settings.runs,
      warmupSeconds: settings.warmupSeconds,
      slowWarmupSeconds: settings.slowWarmupSeconds,
      connections: settings.connections,
      pipelining: 1,
      profiled: settings.profile,
      pinned: settings.pin,
    },
    targets: summaries,
    goals,
    fixtures: Object.fromEntries(
      childrenStarted
        .filter((c) => c.fixtures.seeded !== undefined || c.fixtures.database === 'postgres')
        .map((c) => [c.name, publicFixtures(c.fixtures)]),
    ),
    ca,
  };
  if (settings.profile) {
    // Profiling slows the servers: keep those numbers away from the real results.
    const file = join(PROFILE_DIR, 'results.json');
    writeJson(file, output);
    log(`wrote ${file} (profiled run; bench/results.json left as it was)`);
    for (const [id, file] of profiles)
      log(`\n=== CPU profile of the ${id} server (${file}) ===\n${summarizeFile(file, 20)}`);
  } else {
    writeJson(RESULTS_FILE, output);
    log(`wrote ${RESULTS_FILE}`);
  }
  return 0;
}

process.on('exit', killAllNow);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    if (shuttingDown) return;
    shuttingDown = true;
    interrupted = true;
    process.stderr.write(`\n${signal}: stopping the servers\n`);
    stopCurrentLoad();
    void terminateAll().finally(() => process.exit(130));
  });
}

main().then(
  (code) => process.exit(code),
  async (e: unknown) => {
    if (interrupted) return; // the signal handler exits
    process.stderr.write(`bench broken: ${e instanceof BenchBroken ? e.message : ((e as Error).stack ?? String(e))}\n`);
    shuttingDown = true;
    await terminateAll();
    process.exit(1);
  },
);
