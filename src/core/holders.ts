import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';

/**
 * Who holds a lease or a claim: `host:pid:random`. Job leases and issuance claims name their
 * holder this way so that a process started after a crash can tell a holder that is gone from one
 * that is merely slow, and take its work over at once instead of waiting for the lease to lapse.
 */
export function newHolderId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
}

/**
 * True only when the holder is certainly gone: it ran on this host, in a process that no longer
 * exists. A holder on another host, in this very process, or in a process id that is alive again
 * (reused) counts as alive: its lease or claim then lapses at its expiry time, which bounds the wait.
 */
export function holderIsGone(holder: string): boolean {
  const [host, pidText] = holder.split(':');
  const pid = Number(pidText);
  if (host !== hostname() || !Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (e) {
    // EPERM: the process exists but belongs to someone else.
    return (e as NodeJS.ErrnoException).code === 'ESRCH';
  }
}
