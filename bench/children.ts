// Starts and stops server children (bench/server.ts), one process per target, and talks to them.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { NODE_FLAGS } from '../src/run.js';
import type { ChildFixtures, ChildMessage, ParentMessage, ServerKind, ServerSetup } from './protocol.js';

const SERVER_SCRIPT = fileURLToPath(new URL('./server.ts', import.meta.url));
/** Setup `orders1m` seeds a million orders before it listens. */
const START_TIMEOUT_MS = 600_000;
const REPLY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 5_000;

export interface Usage {
  /** CPU time (user + system) in microseconds since the child started. */
  readonly cpuMicros: number;
  /** The same for the child's DNS server process (0 without one). */
  readonly dnsCpuMicros: number;
  /** Event loop utilization counters (ms). */
  readonly eluActive: number;
  readonly eluIdle: number;
}

/** Every forked child still running, from the fork on (a child that is still starting included). */
const forked = new Set<ChildProcess>();
let terminating = false;

/** Stops every child (SIGTERM: it closes its server and removes its data), SIGKILL after a while. */
export async function terminateAll(): Promise<void> {
  terminating = true;
  await Promise.all(
    [...forked].map(
      (proc) =>
        new Promise<void>((resolve) => {
          if (proc.exitCode !== null || proc.signalCode !== null) {
            resolve();
            return;
          }
          const timer = setTimeout(() => proc.kill('SIGKILL'), STOP_TIMEOUT_MS);
          proc.once('exit', () => {
            clearTimeout(timer);
            resolve();
          });
          proc.kill('SIGTERM');
        }),
    ),
  );
}

/** Last resort, synchronous (for process.on('exit')): SIGKILL whatever still runs. */
export function killAllNow(): void {
  terminating = true;
  for (const proc of forked) proc.kill('SIGKILL');
}

type ReplyMessage = Extract<ChildMessage, { id: number }> | Extract<ChildMessage, { type: 'error' }>;

/** One running server child. */
export class ServerChild {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (m: ChildMessage) => void; reject: (e: Error) => void }>();
  /** Set when the child exits; an exit nobody asked for breaks the benchmark. */
  exitReason: string | undefined;

  private constructor(
    readonly name: string,
    private readonly proc: ChildProcess,
    readonly port: number,
    readonly credentials: { clientId: string; clientSecret: string } | undefined,
    /** What the child made during its setup (bench/protocol.ts). */
    readonly fixtures: ChildFixtures,
  ) {
    proc.on('message', (m: ChildMessage) => this.onMessage(m));
    proc.on('exit', (code, signal) => {
      this.exitReason = `server child ${name} (pid ${String(proc.pid)}) exited: ${signal ?? `code ${String(code)}`}`;
      for (const w of this.waiting.values()) w.reject(new Error(this.exitReason));
      this.waiting.clear();
    });
  }

  get pid(): number | undefined {
    return this.proc.pid;
  }

  get alive(): boolean {
    return this.exitReason === undefined;
  }

  /** Whether the child died without being asked to stop. */
  get crashed(): boolean {
    return this.exitReason !== undefined && !terminating;
  }

  /**
   * Forks `server.ts <kind> <setup>` and waits until it listens. `csrPem` (the bench CSR) goes in
   * the child's environment: the order setups publish its DNS proof.
   */
  static start(name: string, kind: ServerKind, setup: ServerSetup, csrPem: string): Promise<ServerChild> {
    const proc = fork(SERVER_SCRIPT, [kind, setup], {
      // The flags `certdesk serve` runs with (bin/certdesk): the servers measured are the service's.
      execArgv: ['--import', 'tsx', ...NODE_FLAGS],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: { ...process.env, BENCH_CSR_PEM: csrPem },
    });
    forked.add(proc);
    proc.once('exit', () => forked.delete(proc));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        proc.kill('SIGKILL');
        reject(new Error(`server child ${name} did not start within ${START_TIMEOUT_MS / 1000} s`));
      }, START_TIMEOUT_MS);
      const onExit = (code: number | null, signal: string | null) => {
        clearTimeout(timer);
        reject(new Error(`server child ${name} exited before listening: ${signal ?? `code ${String(code)}`}`));
      };
      proc.once('exit', onExit);
      proc.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      proc.once('message', (m: ChildMessage) => {
        clearTimeout(timer);
        proc.off('exit', onExit);
        if (m.type !== 'ready') {
          proc.kill('SIGKILL');
          reject(new Error(`server child ${name}: expected ready, got ${JSON.stringify(m)}`));
          return;
        }
        resolve(new ServerChild(name, proc, m.port, m.credentials, m.fixtures));
      });
    });
  }

  /** CPU and event-loop counters of the child, for utilisation over a run. */
  async usage(): Promise<Usage> {
    const m = await this.request({ type: 'usage' });
    if (m.type !== 'usage') throw new Error(`server child ${this.name}: unexpected reply ${JSON.stringify(m)}`);
    return { cpuMicros: m.cpuMicros, dnsCpuMicros: m.dnsCpuMicros, eluActive: m.eluActive, eluIdle: m.eluIdle };
  }

  async startProfile(): Promise<void> {
    await this.request({ type: 'profile-start' });
  }

  /** Stops the CPU profiler and has the child write the .cpuprofile to `file`. */
  async stopProfile(file: string): Promise<void> {
    await this.request({ type: 'profile-stop', file });
  }

  private request(message: DistributiveOmit<Extract<ParentMessage, { id: number }>, 'id'>): Promise<ChildMessage> {
    if (!this.alive) return Promise.reject(new Error(this.exitReason));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(
          new Error(`server child ${this.name} did not answer ${message.type} within ${REPLY_TIMEOUT_MS / 1000} s`),
        );
      }, REPLY_TIMEOUT_MS);
      this.waiting.set(id, {
        resolve: (m) => {
          clearTimeout(timer);
          resolve(m);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.proc.send({ ...message, id } as ParentMessage);
    });
  }

  private onMessage(m: ChildMessage): void {
    const reply = m as ReplyMessage;
    if (!('id' in reply) || reply.id === undefined) {
      if (m.type === 'error') process.stderr.write(`server child ${this.name}: ${m.message}\n`);
      return;
    }
    const w = this.waiting.get(reply.id);
    if (w === undefined) return;
    this.waiting.delete(reply.id);
    if (m.type === 'error') w.reject(new Error(`server child ${this.name}: ${m.message}`));
    else w.resolve(m);
  }
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
