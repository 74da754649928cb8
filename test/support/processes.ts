// certdesk as real processes (bin/certdesk): started with an environment of their own, killed
// with SIGKILL, as an operator's service manager or a crash would.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CERTDESK = join(ROOT, 'bin', 'certdesk');

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A `certdesk <command>` child (`serve`, `api`, `worker`) with `env` and none of this process's
 * CERTDESK_ variables; `ready` resolves once `readyUrl` answers 200 (or at once without one).
 */
export function certdesk(
  command: string,
  env: Record<string, string>,
  readyUrl?: string,
  options: { logs?: boolean } = {},
): { child: ChildProcess; ready: Promise<void>; logs: () => { level: number; msg: string }[] } {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CERTDESK_')));
  const child = spawn(process.execPath, [CERTDESK, command], {
    cwd: ROOT,
    env: { ...inherited, ...env },
    stdio: ['ignore', options.logs === true ? 'pipe' : 'ignore', 'pipe'],
  });
  // With `logs`, every line it logs (pino's JSON on stdout), kept for the test to read: whole lines only.
  let out = '';
  child.stdout?.on('data', (chunk: Buffer) => void (out += chunk.toString()));
  const logs = () =>
    out
      .slice(0, out.lastIndexOf('\n') + 1)
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { level: number; msg: string });
  // Its messages, shown only when it fails to start.
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => void (stderr = (stderr + chunk.toString()).slice(-4000)));
  const ready = (async () => {
    if (readyUrl === undefined) return;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(
          `certdesk ${command} exited (${child.exitCode ?? child.signalCode}) before it was ready: ${stderr}`,
        );
      try {
        if ((await fetch(readyUrl)).ok) return;
      } catch {
        // not listening yet
      }
      await sleep(100);
    }
  })();
  return { child, ready, logs };
}

/** SIGKILL, and wait until the process is gone. */
export async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = once(child, 'exit');
  child.kill('SIGKILL');
  await gone;
}
