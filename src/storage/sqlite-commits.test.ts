import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readlinkSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { commitMarks, sharedMarks, type CommitMarks } from './sqlite-commits.js';

// The commit marks are read from the file SQLite itself maps; these tests commit through real
// connections (this one, a second one, another process) and want every commit seen.

/** Runs `code` in another process with the SQLite file as process.argv[1]; its exit status and stderr. */
function inAnotherProcess(code: string, file: string): { status: number | null; stderr: string } {
  const r = spawnSync(process.execPath, ['-e', `const D = require('better-sqlite3'); ${code}`, file], {
    cwd: process.cwd(),
    encoding: 'utf8',
  });
  return { status: r.status, stderr: r.stderr };
}

/** This process's open descriptors of `path`. */
function descriptorsOf(path: string): number {
  return readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === path;
    } catch {
      return false;
    }
  }).length;
}

describe('SQLite commit marks (the WAL-index header)', () => {
  const connections: Database.Database[] = [];
  const marks: CommitMarks[] = [];
  const dirs: string[] = [];
  afterEach(() => {
    // The connections first: a mark's descriptor may close only after them.
    for (const c of connections.splice(0)) if (c.open) c.close();
    for (const m of marks.splice(0)) m.close();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  const connect = (file: string): Database.Database => {
    const raw = new Database(file);
    raw.pragma('journal_mode = WAL');
    connections.push(raw);
    return raw;
  };
  const database = (name = 'marks.db'): { raw: Database.Database; file: string; dir: string } => {
    const dir = mkdtempSync(join(tmpdir(), 'certdesk-marks-'));
    dirs.push(dir);
    const file = join(dir, name);
    return { raw: connect(file), file, dir };
  };
  const marksOf = (raw: Database.Database, file: string): CommitMarks => {
    const m = commitMarks(raw, file);
    marks.push(m);
    return m;
  };

  it('ok/the mark stays while only reads happen, and moves with every commit of this connection', () => {
    const { raw, file } = database();
    raw.exec('CREATE TABLE t (a INTEGER)');
    const m = marksOf(raw, file);
    const m0 = m.mark();
    expect(m0).toBeTypeOf('number');
    raw.prepare('SELECT count(*) FROM t').get();
    expect(m.mark()).toBe(m0);
    raw.prepare('INSERT INTO t VALUES (1)').run();
    const m1 = m.mark();
    expect(m1).not.toBe(m0);
    raw.prepare('UPDATE t SET a = 5').run();
    expect(m.mark()).not.toBe(m1);
  });

  it('ok/a commit of another connection, and of another process, moves the mark', () => {
    const { raw, file } = database();
    raw.exec('CREATE TABLE t (a INTEGER)');
    const m = marksOf(raw, file);
    const m0 = m.mark();
    const other = new Database(file);
    other.prepare('INSERT INTO t VALUES (2)').run();
    other.close();
    const m1 = m.mark();
    expect(m1).not.toBe(m0);
    const child = inAnotherProcess(
      "const d = new D(process.argv[1]); d.prepare('INSERT INTO t VALUES (3)').run(); d.close();",
      file,
    );
    expect(child).toEqual({ status: 0, stderr: '' });
    expect(raw.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 2 });
    expect(m.mark()).not.toBe(m1);
  });

  it('ok/a rolled-back transaction leaves the mark; a commit into a WAL restarted by a checkpoint moves it', () => {
    const { raw, file } = database();
    raw.exec('CREATE TABLE t (a INTEGER)');
    raw.pragma('wal_checkpoint(TRUNCATE)');
    const insert = raw.prepare('INSERT INTO t VALUES (1)');
    insert.run();
    const m = marksOf(raw, file);
    const m0 = m.mark();
    raw.exec('BEGIN IMMEDIATE; INSERT INTO t VALUES (1)');
    expect(m.mark()).toBe(m0);
    raw.exec('ROLLBACK');
    expect(m.mark()).toBe(m0);
    // The same commit into a restarted WAL fills the same frames as before: the salts tell them apart.
    raw.pragma('wal_checkpoint(TRUNCATE)');
    insert.run();
    expect(m.mark()).not.toBe(m0);
  });

  it('ok/the backlog counts the frames a checkpoint has not copied back yet, in any connection', () => {
    const { raw, file } = database();
    raw.pragma('wal_autocheckpoint = 0');
    raw.exec('CREATE TABLE t (a BLOB)');
    const m = marksOf(raw, file);
    raw.pragma('wal_checkpoint(TRUNCATE)');
    expect(m.backlog()).toBe(0);
    // 20 rows of 16 KiB: each overflows into four pages or more, all in one commit.
    raw.transaction(() => {
      for (let i = 0; i < 20; i++) raw.prepare('INSERT INTO t VALUES (?)').run(Buffer.alloc(16_384, i));
    })();
    const before = m.backlog()!;
    expect(before).toBeGreaterThanOrEqual(80);
    // A commit of another connection adds to it; a checkpoint of another connection empties it.
    const other = connect(file);
    other.prepare('INSERT INTO t VALUES (?)').run(Buffer.alloc(16_384, 99));
    expect(m.backlog()).toBeGreaterThan(before);
    other.pragma('wal_checkpoint(PASSIVE)');
    expect(m.backlog()).toBe(0);
  });

  it('ok/a fresh or reopened database has marks from its first commit on; a symbolic link finds the file', () => {
    const { raw, file, dir } = database();
    const link = join(dir, 'link.db');
    symlinkSync(file, link);
    const fresh = marksOf(raw, link);
    expect(fresh.mark()).toBeUndefined();
    raw.exec('CREATE TABLE t (a INTEGER)');
    const m0 = fresh.mark();
    expect(m0).toBeTypeOf('number');
    raw.prepare('INSERT INTO t VALUES (1)').run();
    expect(fresh.mark()).not.toBe(m0);
    // Closed (the WAL and -shm files go), then opened again: the new header names no page size
    // until a commit, however often it is asked.
    raw.close();
    fresh.close();
    const again = connect(file);
    const reopened = marksOf(again, file);
    for (let i = 0; i < 200; i++) expect(reopened.mark()).toBeUndefined();
    again.prepare('INSERT INTO t VALUES (2)').run();
    const m1 = reopened.mark();
    expect(m1).toBeTypeOf('number');
    again.prepare('INSERT INTO t VALUES (3)').run();
    expect(reopened.mark()).not.toBe(m1);
  });

  it("race/closing one connection's marks keeps the locks of another connection's transaction (one descriptor, closed last)", () => {
    const { raw: a, file } = database();
    a.exec('CREATE TABLE t (a INTEGER)');
    const ma = marksOf(a, file);
    const b = connect(file);
    const mb = marksOf(b, file);
    expect(ma.mark()).toBeTypeOf('number');
    expect(mb.mark()).toBeTypeOf('number');
    const shm = `${file}-shm`;
    // SQLite's own descriptor, and the marks' one.
    expect(descriptorsOf(shm)).toBe(2);
    a.exec('BEGIN IMMEDIATE; INSERT INTO t VALUES (1)');
    b.close();
    mb.close();
    // A's write lock holds: another process's write is refused at once, not let in beside it.
    const child = inAnotherProcess(
      "const d = new D(process.argv[1]); d.pragma('busy_timeout = 0'); d.prepare('INSERT INTO t VALUES (2)').run();",
      file,
    );
    expect(child.status).not.toBe(0);
    expect(child.stderr).toMatch(/database is locked/);
    a.exec('COMMIT');
    expect(a.prepare('SELECT a FROM t').all()).toEqual([{ a: 1 }]);
    a.close();
    ma.close();
    expect(descriptorsOf(shm)).toBe(0);
  });

  it('fail/no marks for an in-memory database, nor once closed', () => {
    const memory = new Database(':memory:');
    connections.push(memory);
    expect(commitMarks(memory, ':memory:').mark()).toBeUndefined();
    expect(commitMarks(memory, ':memory:').backlog()).toBeUndefined();
    const { raw, file } = database();
    raw.exec('CREATE TABLE t (a INTEGER)');
    const m = marksOf(raw, file);
    expect(m.mark()).toBeTypeOf('number');
    raw.close();
    m.close();
    expect(m.mark()).toBeUndefined();
    expect(m.backlog()).toBeUndefined();
    m.close();
  });

  it("fail/a file that is not this database's header gives no marks (another database's size)", () => {
    const a = database('a.db');
    a.raw.exec('CREATE TABLE t (a INTEGER)');
    const b = database('b.db');
    b.raw.exec('CREATE TABLE t (a INTEGER); CREATE TABLE u (b TEXT); CREATE TABLE v (c TEXT)');
    // b's connection, asked about a's file: a's header names a database of another size.
    expect(marksOf(b.raw, a.file).mark()).toBeUndefined();
    expect(marksOf(a.raw, a.file).mark()).toBeTypeOf('number');
  });
});

describe('sharedMarks (one header read for the requests waiting)', () => {
  const marksFrom = (mark: () => number | undefined): CommitMarks => ({
    mark,
    backlog: () => undefined,
    close: () => undefined,
  });

  it('ok/the calls waiting when the mark is taken share one read, taken after every one of them was made', async () => {
    let reads = 0;
    const calls: number[] = [];
    const shared = sharedMarks(
      marksFrom(() => {
        reads++;
        return calls.length;
      }),
    );
    const answers = Promise.all(
      [1, 2, 3, 4, 5].map((i) => {
        calls.push(i);
        return shared();
      }),
    );
    // Each answer is a mark read after all five calls were made.
    expect(await answers).toEqual([5, 5, 5, 5, 5]);
    expect(reads).toBe(1);
  });

  it('race/a call made after the mark was taken never gets it: it waits for a new read (a commit in between is seen)', async () => {
    let committed = 0;
    const shared = sharedMarks(marksFrom(() => committed));
    const first = shared();
    const second = first.then(() => {
      // Answered the first mark; a commit lands, and a request comes in after it.
      committed++;
      return shared();
    });
    expect(await first).toBe(0);
    expect(await second).toBe(1);
    // Calls in the same turn after an answer, and after a timer, are answered by new reads too.
    committed++;
    await new Promise((resolve) => setTimeout(resolve, 1));
    expect(await shared()).toBe(2);
  });

  it('fail/a mark that cannot be read answers undefined (the callers read the database); the next call reads again', async () => {
    let fail = true;
    const shared = sharedMarks(
      marksFrom(() => {
        if (fail) throw new Error('EBADF');
        return 7;
      }),
    );
    expect(await Promise.all([shared(), shared()])).toEqual([undefined, undefined]);
    fail = false;
    expect(await shared()).toBe(7);
  });

  it("ok/a test's fake timers do not hold the read back (a lost immediate would stall every later mark)", async () => {
    vi.useFakeTimers();
    try {
      const shared = sharedMarks(marksFrom(() => 3));
      expect(await shared()).toBe(3);
    } finally {
      vi.useRealTimers();
    }
  });
});
