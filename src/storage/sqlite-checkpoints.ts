import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type Database from 'better-sqlite3';
import type { CommitMarks } from './sqlite-commits.js';

// WAL checkpoints on a thread of their own. SQLite checkpoints in the commit that crosses
// `wal_autocheckpoint`: that commit copies the WAL's pages back into the database and syncs both
// files, on the event loop, while every request waits. Measured on POST /Order under load: 17 of
// 3,581 commits took 5-125 ms, 45 % of all the time spent committing. Here the event loop only
// reads the WAL-index (`CommitMarks.backlog`, one small read every POLL_MS); once the backlog
// reaches `frames`, a thread with its own connection runs a PASSIVE checkpoint, which never
// blocks the writers: they go on appending while it copies. The connection's own autocheckpoint
// stays, at FALLBACK_FRAMES, in case the thread cannot keep up or could not start.

/** How often the event loop looks at the WAL's backlog. */
const POLL_MS = 250;
/**
 * The backlog, in frames (pages), that starts a checkpoint: ~40 MB of 4 KiB pages, SQLite's default
 * times ten. A page written by many commits in between (an index's last leaf, the audit table's
 * end) is copied back once, not once per thousand pages: recording issued certificates went ~12 %
 * faster than at the default (bench/ca.ts, ECDSA), when that was still done in a commit.
 */
export const CHECKPOINT_FRAMES = 10_000;
/** At most this many checkpoints back to back in one cycle (see `checkpointsAside`). */
const MAX_ROUNDS = 20;
/** The connection's own autocheckpoint, for when the thread is not there or falls behind. */
export const FALLBACK_FRAMES = 40_000;

export interface Checkpoints {
  /** Checkpoints the thread has finished (for tests and the curious). */
  readonly done: () => number;
  /** Stops polling and closes the thread's connection; before the Db's own connection closes. */
  close(): Promise<void>;
}

/** CommonJS, run by the thread: one connection, one PASSIVE checkpoint per message, answered whether it ran. */
const THREAD = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.module);
const db = new Database(workerData.file, { fileMustExist: true });
db.pragma('synchronous = NORMAL');
parentPort.on('message', (message) => {
  if (message === 'close') {
    db.close();
    parentPort.close();
    return;
  }
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
    parentPort.postMessage(true);
  } catch {
    parentPort.postMessage(false);
  }
});
`;

/**
 * Checkpoints `file`'s WAL beside the event loop (see above). `raw` is the Db's connection: its
 * autocheckpoint is raised to FALLBACK_FRAMES. The thread starts at the first checkpoint, so a
 * database that stays small (most tests) never starts one.
 */
export function checkpointsAside(
  raw: Database.Database,
  file: string,
  marks: Pick<CommitMarks, 'backlog'>,
  frames = CHECKPOINT_FRAMES,
): Checkpoints {
  raw.pragma(`wal_autocheckpoint = ${FALLBACK_FRAMES}`);
  let thread: { readonly worker: Worker; readonly exited: Promise<void> } | undefined;
  let running = false;
  let failed = false;
  let closing: Promise<void> | undefined;
  let done = 0;
  /** Checkpoints run back to back in the current cycle. */
  let rounds = 0;

  const start = (): NonNullable<typeof thread> => {
    const worker = new Worker(THREAD, {
      eval: true,
      // None of the process's own flags: its loader is not needed, and with --input-type=module
      // (node -e of an ES module) the thread's CommonJS would not run at all.
      execArgv: [],
      workerData: { module: createRequire(import.meta.url).resolve('better-sqlite3'), file },
    });
    // Unref'd, not to keep a process alive for a checkpoint; `close` refs it to wait for its end.
    worker.unref();
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.on('message', (ran: boolean) => {
      running = false;
      if (ran) done++;
      // A cycle goes on until no frame is left behind: a PASSIVE checkpoint copies the frames
      // there were when it began, and a writer starts the WAL over (instead of letting it grow to
      // the fallback, whose checkpoint runs in a commit) only once every frame is copied. Each
      // round has fewer frames to copy: those committed during the round before.
      const backlog = marks.backlog();
      if (ran && closing === undefined && backlog !== undefined && backlog > 0 && ++rounds < MAX_ROUNDS) checkpoint();
      else rounds = 0;
    });
    // A thread that could not start or died: the connection's own autocheckpoint takes over.
    worker.on('error', () => {
      failed = true;
      running = false;
      if (raw.open) raw.pragma(`wal_autocheckpoint = ${CHECKPOINT_FRAMES}`);
    });
    return { worker, exited };
  };

  const checkpoint = () => {
    thread ??= start();
    running = true;
    thread.worker.postMessage('checkpoint');
  };

  const poll = setInterval(() => {
    if (running || failed || closing !== undefined) return;
    const backlog = marks.backlog();
    if (backlog !== undefined && backlog >= frames) checkpoint();
  }, POLL_MS);
  poll.unref();

  return {
    done: () => done,
    // Once, however often called: a second call waits for the first (the Db closes its connection
    // and the marks' descriptor only after the thread's connection is closed).
    close: () =>
      (closing ??= (async () => {
        clearInterval(poll);
        if (thread === undefined) return;
        thread.worker.ref();
        if (!failed) thread.worker.postMessage('close');
        await thread.exited;
      })()),
  };
}
