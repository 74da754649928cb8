import { randomBytes } from 'node:crypto';
import { readlinkSync } from 'node:fs';
import { hostname } from 'node:os';

/**
 * The machine part of a holder's name: the host name and, on Linux, the PID namespace the process
 * runs in (`/proc/self/ns/pid`). Containers on one machine may share its host name (Docker's
 * `--network host`, Kubernetes' `hostNetwork`) while each sees only its own processes: a process
 * id that does not exist here may be alive in the next container, so only a holder of the same
 * namespace can be judged gone. Where the namespace cannot be read, the host name alone.
 */
export const holderHost: string = (() => {
  let namespace = '';
  try {
    namespace = /\[(\d+)\]/.exec(readlinkSync('/proc/self/ns/pid'))?.[1] ?? '';
  } catch {
    // Not Linux, or no /proc: the host name alone.
  }
  return namespace === '' ? hostname() : `${hostname()}.pidns-${namespace}`;
})();

/**
 * Who holds a lease or a claim: `host:pid:random` (host: `holderHost`). Job leases and issuance
 * claims name their holder this way so that a process started after a crash can tell a holder
 * that is gone from one that is merely slow, and take its work over at once instead of waiting
 * for the lease to lapse.
 */
export function newHolderId(): string {
  return `${holderHost}:${process.pid}:${randomBytes(4).toString('hex')}`;
}

/**
 * True only when the holder is certainly gone: it ran on this host, in this PID namespace, in a
 * process that no longer exists. A holder on another host or in another namespace (a container
 * sharing the host name; a holder named before namespaces were part of the name), in this very
 * process, or in a process id that is alive again (reused) counts as alive: its lease or claim
 * then lapses at its expiry time, which bounds the wait.
 */
export function holderIsGone(holder: string): boolean {
  const [host, pidText] = holder.split(':');
  const pid = Number(pidText);
  if (host !== holderHost || !Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (e) {
    // EPERM: the process exists but belongs to someone else.
    return (e as NodeJS.ErrnoException).code === 'ESRCH';
  }
}
