import { closeSync, openSync, readSync, realpathSync } from 'node:fs';
import { endianness } from 'node:os';
import type Database from 'better-sqlite3';
import { checkPhaseBatches } from '../core/index.js';

// Whether anything was committed to a SQLite database since a moment, by any connection of any
// process, for the price of one small read instead of a read transaction (two lock calls and the
// query). In WAL mode every commit rewrites the WAL-index header at the start of the database's
// `-shm` file (https://www.sqlite.org/walformat.html, "The WAL-Index Header"): the shared memory
// every connection maps, from which each read transaction takes the committed state it sees. The
// header counts the commits and ends with the last frame's checksum; a checkpoint that restarts
// the WAL changes its salts. So a header read before something is read, and equal to the one read
// now, means that nothing has committed in between.
//
// The header is read as SQLite's own readers read it (`walIndexTryHdr`): its two copies must be
// equal (a writer writes the second first) and its checksum right, else it is being written and
// gives no mark. Where there is no such file (an in-memory database), or it does not hold this
// database's header, there are no marks: callers read the database.

/** One copy of the header (WalIndexHdr); its checksum covers the bytes before it. */
const HEADER_BYTES = 48;
const CHECKSUM_AT = 40;
/** mxFrame in the header: the last valid frame of the WAL. */
const MAX_FRAME_AT = 16;
/** nBackfill, the first field of the checkpoint information after the header's two copies. */
const BACKFILL_AT = 2 * HEADER_BYTES;
/** The wal-index format, the same since SQLite 3.7.0. */
const WAL_INDEX_VERSION = 3_007_000;
const LITTLE_ENDIAN = endianness() === 'LE';

export interface CommitMarks {
  /**
   * A mark of the committed state: two equal marks, nothing committed between them (in any
   * process). Undefined when that cannot be told now (a commit being written, a header not yet
   * recognised as this database's); the caller then reads the database.
   */
  mark(): number | undefined;
  /**
   * WAL frames not yet copied back into the database (`mxFrame - nBackfill` of the WAL-index: the
   * work a checkpoint would do now); undefined when the header cannot be read at this moment.
   */
  backlog(): number | undefined;
  /** Call once the connection is closed (see `shmFiles`). */
  close(): void;
}

const NO_MARKS: CommitMarks = { mark: () => undefined, backlog: () => undefined, close: () => undefined };

/** The commit marks of the database `raw` has open in WAL mode at `file`. */
export function commitMarks(raw: Database.Database, file: string): CommitMarks {
  if (raw.memory) return NO_MARKS;
  let shm: ShmFile | undefined;
  const both = Buffer.allocUnsafeSlow(2 * HEADER_BYTES + 4);
  /** The last header seen, and the mark given for it: a new header, a new mark. */
  const seen = Buffer.alloc(HEADER_BYTES);
  let current = 0;
  let recognised = false;
  /** A header that was not recognised: asked again only once it has changed (a commit). */
  const refused = Buffer.alloc(HEADER_BYTES);

  let open = true;
  // The header, when whole; it stays in `both` until the next read.
  const read = (): Buffer | undefined => {
    if (!open) return undefined;
    shm ??= shmFiles.open(file);
    if (shm === undefined || readSync(shm.fd, both, 0, both.length, 0) !== both.length) return undefined;
    const header = both.subarray(0, HEADER_BYTES);
    if (!header.equals(both.subarray(HEADER_BYTES, 2 * HEADER_BYTES))) return undefined;
    return u32(header, 0) === WAL_INDEX_VERSION && header[12] === 1 && checksumHolds(header) ? header : undefined;
  };

  // Whether the header is this database's: its page size, and the database's size at the last
  // commit. Until the first commit after the file was made (a fresh database, a restart) the
  // header names neither, and marks wait for that commit.
  const recognise = (header: Buffer): boolean => {
    if (raw.inTransaction) return false;
    if (header.equals(refused)) return false;
    const pageSize = raw.pragma('page_size', { simple: true }) as number;
    const pages = raw.pragma('page_count', { simple: true }) as number;
    // szPage holds 65,536 as 1 (a u16 cannot hold it).
    const size = LITTLE_ENDIAN ? header.readUInt16LE(14) : header.readUInt16BE(14);
    if ((size === 1 ? 65_536 : size) === pageSize && u32(header, 20) === pages) return true;
    header.copy(refused);
    return false;
  };

  return {
    mark: () => {
      const header = read();
      if (header === undefined || !(recognised ||= recognise(header))) return undefined;
      if (!header.equals(seen)) {
        header.copy(seen);
        current++;
      }
      return current;
    },
    backlog: () => {
      const header = read();
      if (header === undefined) return undefined;
      return Math.max(0, u32(header, MAX_FRAME_AT) - u32(both, BACKFILL_AT));
    },
    close: () => {
      if (!open) return;
      open = false;
      if (shm !== undefined) shmFiles.release(shm);
      shm = undefined;
    },
  };
}

/**
 * `mark`, taken once for every caller waiting when it is taken. A mark stands for a read of the
 * committed state at the moment it is taken, so it may answer a request only if taken after that
 * request was received: each call waits for the next turn of the event loop's check phase, after
 * the poll phase has read what the sockets hold, and one mark then answers every call made
 * before it. Under load one read of the header serves the many requests a poll phase brings in;
 * a call made after the mark was taken waits for the next one. A mark that fails to read is none:
 * the callers read the database.
 */
export function sharedMarks(marks: CommitMarks): () => Promise<number | undefined> {
  // Where there can be no marks (an in-memory database) there is nothing to wait for.
  if (marks === NO_MARKS) return () => Promise.resolve(undefined);
  const wait = checkPhaseBatches<(mark: number | undefined) => void>((callers) => {
    let taken: number | undefined;
    try {
      taken = marks.mark();
    } catch {
      taken = undefined;
    }
    for (const answer of callers) answer(taken);
  });
  return () => new Promise((resolve) => wait(resolve));
}

function u32(b: Buffer, at: number): number {
  return LITTLE_ENDIAN ? b.readUInt32LE(at) : b.readUInt32BE(at);
}

/** SQLite's checksum of the header (`walChecksumBytes`, native byte order) against the one it holds. */
function checksumHolds(header: Buffer): boolean {
  let s1 = 0;
  let s2 = 0;
  for (let at = 0; at < CHECKSUM_AT; at += 8) {
    s1 = (s1 + u32(header, at) + s2) >>> 0;
    s2 = (s2 + u32(header, at + 4) + s1) >>> 0;
  }
  return s1 === u32(header, CHECKSUM_AT) && s2 === u32(header, CHECKSUM_AT + 4);
}

interface ShmFile {
  readonly path: string;
  readonly fd: number;
  holders: number;
}

/**
 * One read-only descriptor per `-shm` file in this process, closed after the last holder let go.
 * SQLite locks that file with POSIX record locks, which belong to the process: closing any
 * descriptor of the file drops every one of them, SQLite's too (another process could then
 * write beside a transaction in progress here). So the descriptor is closed only once every
 * SQLite connection of this process to the file is closed (`Db.close` closes its connection
 * first); a connection opened beside a Db, not through one, must be closed before the Db is.
 */
const shmFiles = {
  byPath: new Map<string, ShmFile>(),
  open(file: string): ShmFile | undefined {
    let path: string;
    try {
      // SQLite names the file after the database's real path, symbolic links resolved.
      path = `${realpathSync(file)}-shm`;
    } catch {
      return undefined;
    }
    let shm = this.byPath.get(path);
    if (shm === undefined) {
      try {
        shm = { path, fd: openSync(path, 'r'), holders: 0 };
      } catch {
        return undefined;
      }
      this.byPath.set(path, shm);
    }
    shm.holders++;
    return shm;
  },
  release(shm: ShmFile): void {
    if (--shm.holders > 0) return;
    this.byPath.delete(shm.path);
    closeSync(shm.fd);
  },
};
