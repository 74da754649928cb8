// The order children's DNS server, in a process of its own: a deployment asks a resolver on
// another machine, so the server's answers are not certdesk's CPU. Forked by a certdesk server
// child (`startDnsChild`), which sets records over IPC; the child exits when its parent goes away.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startDnsServer, type TestRecord } from '../test/support/dns-server.js';

type DnsChildMessage =
  | { type: 'ready'; address: string }
  | { type: 'done'; seq: number }
  | { type: 'usage'; seq: number; cpuMicros: number };
type DnsParentMessage =
  { type: 'set'; seq: number; name: string; records: readonly TestRecord[] } | { type: 'usage'; seq: number };

/** The DNS server of a certdesk bench child, in its own process. */
export interface DnsChild {
  /** `host:port` for CERTDESK_DNS_SERVERS. */
  readonly address: string;
  /** Replaces a name's records; resolves once the server answers with them. */
  set(name: string, records: readonly TestRecord[]): Promise<void>;
  /** The DNS server process's CPU time (user + system) in microseconds since it started. */
  cpuMicros(): Promise<number>;
  close(): Promise<void>;
}

/** Forks the DNS server process and waits for its address. */
export async function startDnsChild(): Promise<DnsChild> {
  const proc: ChildProcess = fork(fileURLToPath(import.meta.url), ['serve'], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const waiting = new Map<number, { resolve: (cpuMicros: number) => void; reject: (e: Error) => void }>();
  let seq = 0;
  const address = await new Promise<string>((resolve, reject) => {
    proc.once('exit', (code) => reject(new Error(`the bench DNS server exited (${String(code)})`)));
    proc.on('message', (m: DnsChildMessage) => {
      if (m.type === 'ready') resolve(m.address);
      else {
        waiting.get(m.seq)?.resolve(m.type === 'usage' ? m.cpuMicros : 0);
        waiting.delete(m.seq);
      }
    });
  });
  proc.removeAllListeners('exit');
  // A server that dies leaves no question unanswered: the bench child then fails instead of waiting.
  proc.once('exit', (code) => {
    for (const w of waiting.values()) w.reject(new Error(`the bench DNS server exited (${String(code)})`));
    waiting.clear();
  });
  const ask = (message: DnsParentMessage) =>
    new Promise<number>((resolve, reject) => {
      if (proc.exitCode !== null || proc.signalCode !== null)
        return reject(new Error('the bench DNS server has exited'));
      waiting.set(message.seq, { resolve, reject });
      proc.send(message);
    });
  return {
    address,
    set: async (name, records) => void (await ask({ type: 'set', seq: ++seq, name, records })),
    cpuMicros: () => ask({ type: 'usage', seq: ++seq }),
    close: () =>
      new Promise<void>((resolve) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
        proc.once('exit', () => resolve());
        proc.disconnect();
      }),
  };
}

async function serve(): Promise<void> {
  const dns = await startDnsServer();
  process.on('message', (m: DnsParentMessage) => {
    if (m.type === 'set') {
      dns.set(m.name, m.records);
      process.send!({ type: 'done', seq: m.seq } satisfies DnsChildMessage);
    } else {
      const cpu = process.cpuUsage();
      process.send!({ type: 'usage', seq: m.seq, cpuMicros: cpu.user + cpu.system } satisfies DnsChildMessage);
    }
  });
  process.once('disconnect', () => void dns.close().finally(() => process.exit(0)));
  process.send!({ type: 'ready', address: dns.address } satisfies DnsChildMessage);
}

if (process.argv[2] === 'serve' && process.send !== undefined) {
  serve().catch((e: unknown) => {
    process.stderr.write(`bench DNS server failed: ${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  });
}
