// Summarises a V8 .cpuprofile: where the server's CPU time goes.
//   node --import tsx bench/profile-summary.ts bench/profiles/profile.cpuprofile [top]
// Self time per function and per module (npm package, src/ file, node internals; native code is
// charged to the JS module that called it), inclusive time per module and per src/ function
// (a sample counts for everything on its stack). Percentages are of busy (non-idle) time.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** `(idle)` is time the event loop waited: not CPU. */
const IDLE = '(idle)';

/** A short module name for a script URL: `fastify`, `src/web/auth.ts`, `node:internal/…`. */
export function moduleOf(url: string, functionName: string): string {
  if (url === '') return functionName.startsWith('(') ? functionName : '(native)';
  const path = url.startsWith('file://') ? decodeURIComponent(url.slice('file://'.length)) : url;
  const nm = path.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = path.slice(nm + '/node_modules/'.length).split('/');
    return rest[0]?.startsWith('@') === true ? `${rest[0]}/${rest[1] ?? ''}` : (rest[0] ?? path);
  }
  const src = path.lastIndexOf('/src/');
  if (src >= 0) return path.slice(src + 1);
  const bench = path.lastIndexOf('/bench/');
  if (bench >= 0) return path.slice(bench + 1);
  if (path.startsWith('node:')) return path.split('/').slice(0, 2).join('/');
  return path;
}

function label(frame: CallFrame): string {
  const name = frame.functionName === '' ? '(anonymous)' : frame.functionName;
  if (frame.url === '') return name;
  return `${name}  ${moduleOf(frame.url, frame.functionName)}:${frame.lineNumber + 1}`;
}

/** A frame of V8 itself: (garbage collector), (program), (idle), (root). */
const isVmFrame = (frame: CallFrame) => frame.url === '' && frame.functionName.startsWith('(');

export interface ProfileSummary {
  readonly totalMs: number;
  readonly busyMs: number;
  readonly selfByFunction: [string, number][];
  readonly selfByModule: [string, number][];
  readonly inclusiveByModule: [string, number][];
  readonly inclusiveBySrcFunction: [string, number][];
}

export function summarize(profile: CpuProfile): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

  const selfByNode = new Map<number, number>();
  let totalMicros = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = profile.timeDeltas[i] ?? 0;
    const id = profile.samples[i]!;
    selfByNode.set(id, (selfByNode.get(id) ?? 0) + dt);
    totalMicros += dt;
  }

  const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);
  const selfByFunction = new Map<string, number>();
  const selfByModule = new Map<string, number>();
  const inclusiveByModule = new Map<string, number>();
  const inclusiveBySrcFunction = new Map<string, number>();
  let busyMicros = 0;
  for (const [id, micros] of selfByNode) {
    const node = byId.get(id);
    if (node === undefined || node.callFrame.functionName === IDLE) continue;
    busyMicros += micros;
    const frame = node.callFrame;

    // Walk the stack once: the modules and src/ functions on it, and the nearest JS caller.
    const modules = new Set<string>();
    const srcFunctions = new Set<string>();
    let caller: CallFrame | undefined;
    for (let cur = parent.get(id); cur !== undefined; cur = parent.get(cur)) {
      const f = byId.get(cur)?.callFrame;
      if (f === undefined || f.url === '') continue;
      caller ??= f;
      const mod = moduleOf(f.url, f.functionName);
      modules.add(mod);
      if (mod.startsWith('src/')) srcFunctions.add(`${f.functionName === '' ? '(anonymous)' : f.functionName}  ${mod}`);
    }

    if (frame.url === '' && !isVmFrame(frame)) {
      // A native function (C++ binding or builtin): name it with the JS code that called it.
      const from =
        caller === undefined
          ? ''
          : `${caller.functionName === '' ? '(anonymous)' : caller.functionName} ${moduleOf(caller.url, caller.functionName)}`;
      add(selfByFunction, `${frame.functionName} [native${from === '' ? '' : `, called by ${from}`}]`, micros);
      add(
        selfByModule,
        caller === undefined ? '(native)' : `${moduleOf(caller.url, caller.functionName)} (native)`,
        micros,
      );
    } else {
      add(selfByFunction, label(frame), micros);
      add(selfByModule, moduleOf(frame.url, frame.functionName), micros);
      if (frame.url !== '') {
        const mod = moduleOf(frame.url, frame.functionName);
        modules.add(mod);
        if (mod.startsWith('src/'))
          srcFunctions.add(`${frame.functionName === '' ? '(anonymous)' : frame.functionName}  ${mod}`);
      }
    }
    for (const mod of modules) add(inclusiveByModule, mod, micros);
    for (const f of srcFunctions) add(inclusiveBySrcFunction, f, micros);
  }

  const ms = (m: Map<string, number>) =>
    [...m].map(([k, v]): [string, number] => [k, v / 1000]).sort((a, b) => b[1] - a[1]);
  return {
    totalMs: totalMicros / 1000,
    busyMs: busyMicros / 1000,
    selfByFunction: ms(selfByFunction),
    selfByModule: ms(selfByModule),
    inclusiveByModule: ms(inclusiveByModule),
    inclusiveBySrcFunction: ms(inclusiveBySrcFunction),
  };
}

/** The summary as text: top `top` rows of each list, in % of busy (non-idle) time. */
export function formatSummary(s: ProfileSummary, top = 25): string {
  const pct = (v: number) => `${((100 * v) / s.busyMs).toFixed(1).padStart(5)} %`;
  const rows = (list: [string, number][]) =>
    list
      .slice(0, top)
      .map(([k, v]) => `  ${pct(v)}  ${v.toFixed(0).padStart(7)} ms  ${k}`)
      .join('\n');
  return [
    `sampled ${s.totalMs.toFixed(0)} ms, busy (not idle) ${s.busyMs.toFixed(0)} ms; percentages are of busy time`,
    `self time by function (top ${top}):`,
    rows(s.selfByFunction),
    `self time by module:`,
    rows(s.selfByModule),
    `inclusive time by module (a sample counts for every module on its stack):`,
    rows(s.inclusiveByModule),
    `inclusive time by certdesk function (src/):`,
    rows(s.inclusiveBySrcFunction),
  ].join('\n');
}

export function summarizeFile(file: string, top = 25): string {
  return formatSummary(summarize(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile), top);
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === resolve(process.argv[1])) {
  const [file, top] = process.argv.slice(2);
  if (file === undefined) {
    process.stderr.write('usage: node --import tsx bench/profile-summary.ts <file.cpuprofile> [top]\n');
    process.exit(2);
  }
  process.stdout.write(`${summarizeFile(file, top === undefined ? 25 : Number(top))}\n`);
}
