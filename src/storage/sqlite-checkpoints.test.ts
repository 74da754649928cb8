import { copyFileSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { sql } from 'kysely';
import { spawn, spawnSync } from 'node:child_process';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openDatabase } from './database.js';
import { CHECKPOINT_FRAMES, FALLBACK_FRAMES, checkpointsAside, type Checkpoints } from './sqlite-checkpoints.js';
import { commitMarks, type CommitMarks } from './sqlite-commits.js';

// The checkpoint thread copies the WAL back with a connection of its own, while this one writes.
// The waits poll for what the thread did (vi.waitFor, generous timeouts): nothing here depends on
// how fast the machine is.

const WAIT = { timeout: 30_000, interval: 50 };

/** The rows of table t in the database at `file`, opened anew, and whether the file is whole. */
function reopened(file: string): { rows: unknown; integrity: unknown } {
  const db = new Database(file);
  try {
    return {
      rows: (db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n,
      integrity: db.pragma('integrity_check', { simple: true }),
    };
  } finally {
    db.close();
  }
}

describe('WAL checkpoints on a thread of their own', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  /** A new directory, removed after the test. */
  const scratchDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'certdesk-checkpoints-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    return dir;
  };
  const database = () => {
    const dir = scratchDir();
    const file = join(dir, 'c.db');
    const raw = new Database(file);
    raw.pragma('journal_mode = WAL');
    raw.pragma('synchronous = NORMAL');
    raw.exec('CREATE TABLE t (i INTEGER PRIMARY KEY, a BLOB)');
    const marks = commitMarks(raw, file);
    // Closed in this order: the thread's connection, this one, then the marks' descriptor.
    cleanups.push(() => marks.close());
    cleanups.push(() => {
      if (raw.open) raw.close();
    });
    return { raw, file, marks };
  };
  const aside = (raw: Database.Database, file: string, marks: Pick<CommitMarks, 'backlog'>, frames: number) => {
    const c = checkpointsAside(raw, file, marks, frames);
    cleanups.push(() => c.close());
    return c;
  };
  const write = (raw: Database.Database, from: number, rows: number) => {
    const insert = raw.prepare('INSERT INTO t VALUES (?, ?)');
    raw.transaction(() => {
      for (let i = from; i < from + rows; i++) insert.run(i, Buffer.alloc(8_192, i));
    })();
  };

  it('ok/a backlog past the threshold is copied back by the thread; the connection keeps only the fallback', async () => {
    const { raw, file, marks } = database();
    const checkpoints: Checkpoints = aside(raw, file, marks, 100);
    expect(raw.pragma('wal_autocheckpoint', { simple: true })).toBe(FALLBACK_FRAMES);
    write(raw, 0, 10); // ~20 frames: under the threshold, no checkpoint
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(checkpoints.done()).toBe(0);
    expect(marks.backlog()).toBeGreaterThan(0);
    write(raw, 10, 100);
    await vi.waitFor(() => expect(checkpoints.done()).toBeGreaterThanOrEqual(1), WAIT);
    expect(marks.backlog()).toBe(0);
    // The database file itself holds the rows now: a copy of that file alone, without its WAL, has them.
    const copy = `${file}.copy`;
    copyFileSync(file, copy);
    const reader = new Database(copy, { readonly: true });
    expect(reader.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 110 });
    reader.close();
  });

  it('race/commits go on while the thread checkpoints: every row is kept, the file stays whole', async () => {
    const { raw, file, marks } = database();
    const checkpoints = aside(raw, file, marks, 50);
    let rows = 0;
    let largestWal = 0;
    // Write until the thread has checkpointed several times under the writes (each round yields
    // to the event loop, whose poll starts the checkpoints), then a little more.
    while (checkpoints.done() < 10) {
      if (rows > 200_000) throw new Error(`the thread checkpointed ${checkpoints.done()} times in ${rows} rows`);
      write(raw, rows, 20);
      rows += 20;
      largestWal = Math.max(largestWal, statSync(`${file}-wal`).size);
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    write(raw, rows, 20);
    rows += 20;
    expect(raw.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: rows });
    expect(raw.pragma('integrity_check', { simple: true })).toBe('ok');
    // The WAL started over after the checkpoints: it never held the ~3 frames of each of the rows.
    expect(largestWal).toBeLessThan(rows * 3 * 4096);
    await checkpoints.close();
    raw.close();
    expect(reopened(file)).toEqual({ rows, integrity: 'ok' });
  });

  it('fail/a thread that cannot open the database hands checkpoints back to the connection', async () => {
    const { raw, file, marks } = database();
    const checkpoints = aside(raw, join(file, 'not-a-file'), { backlog: () => 1_000_000 }, 1);
    await vi.waitFor(() => expect(raw.pragma('wal_autocheckpoint', { simple: true })).toBe(CHECKPOINT_FRAMES), WAIT);
    expect(checkpoints.done()).toBe(0);
    await checkpoints.close();
    // The connection checkpoints again by itself: 600 rows of 8 KiB (three frames each) in
    // commits of 100 cross its threshold, and its commit copies them back.
    for (let i = 0; i < 60; i++) write(raw, i * 100, 100);
    expect(marks.backlog()).toBeLessThan(CHECKPOINT_FRAMES);
  });

  it('ok/closing before any checkpoint starts no thread; closing twice is harmless', async () => {
    const { raw, file, marks } = database();
    const checkpoints = checkpointsAside(raw, file, marks, 1_000_000);
    write(raw, 0, 10);
    await checkpoints.close();
    await checkpoints.close();
    expect(checkpoints.done()).toBe(0);
  });

  it('race/a close called twice while the thread checkpoints: both wait for the thread to end', async () => {
    const { raw, file, marks } = database();
    const checkpoints = checkpointsAside(raw, file, marks, 10);
    write(raw, 0, 200);
    await vi.waitFor(() => expect(checkpoints.done()).toBeGreaterThanOrEqual(1), WAIT);
    write(raw, 200, 200);
    // Both calls, made in one turn, resolve only once the thread's connection is closed.
    const closed = await Promise.all([checkpoints.close(), checkpoints.close()]);
    expect(closed).toEqual([undefined, undefined]);
    raw.close();
    expect(reopened(file)).toEqual({ rows: 400, integrity: 'ok' });
  });

  it('ok/a process whose only work left is closing the Db waits for the thread, and exits 0', async () => {
    // As a CLI command does: a child process opens a Db on a file, writes past the threshold (the
    // thread starts), and closes at the end of its top-level await; then it exits 0 with every row.
    const dir = scratchDir();
    const code = `
      const { openDatabase } = await import(${JSON.stringify(new URL('./database.ts', import.meta.url).pathname)});
      const { sql } = await import('kysely');
      const db = await openDatabase({ url: process.argv[1] });
      await sql\`CREATE TABLE t (a BLOB)\`.execute(db.kysely);
      // ~14,000 frames (4,800 rows of 8 KiB, three pages each): past the thread's threshold.
      for (let i = 0; i < 4; i++) await sql\`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 1200) INSERT INTO t SELECT randomblob(8192) FROM c\`.execute(db.kysely);
      await new Promise((resolve) => setTimeout(resolve, 600));
      // Still the fallback: the thread started and did not fail (a failed one hands the threshold back).
      const { rows } = await sql\`PRAGMA wal_autocheckpoint\`.execute(db.kysely);
      await db.close();
      console.log(rows[0].wal_autocheckpoint, 'closed');
    `;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code, join(dir, 'p.db')], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe(`${FALLBACK_FRAMES} closed`);
    expect(r.status).toBe(0);
    expect(reopened(join(dir, 'p.db'))).toEqual({ rows: 4_800, integrity: 'ok' });
  });

  it('race/two processes on one file, each with its own thread: checkpoints and commits of both, every row kept', async () => {
    // A deployment may run `serve` and `worker` on one SQLite file: both threads checkpoint the
    // one WAL while both processes commit. SQLite lets one checkpoint run at a time (the other is
    // told it is busy) and never blocks a writer with a PASSIVE one; the WAL starts over between.
    const dir = scratchDir();
    const file = join(dir, 'two.db');
    const setup = new Database(file);
    setup.pragma('journal_mode = WAL');
    setup.exec('CREATE TABLE t (i INTEGER PRIMARY KEY, who TEXT NOT NULL, a BLOB)');
    setup.close();
    const module = (name: string) => JSON.stringify(new URL(name, import.meta.url).pathname);
    const code = `
      const { default: Database } = await import('better-sqlite3');
      const { checkpointsAside } = await import(${module('./sqlite-checkpoints.ts')});
      const { commitMarks } = await import(${module('./sqlite-commits.ts')});
      const [file, who] = process.argv.slice(1);
      const raw = new Database(file);
      raw.pragma('busy_timeout = 10000');
      raw.pragma('synchronous = NORMAL');
      const marks = commitMarks(raw, file);
      const checkpoints = checkpointsAside(raw, file, marks, 50);
      const insert = raw.prepare('INSERT INTO t (who, a) VALUES (?, ?)');
      const write = raw.transaction(() => { for (let k = 0; k < 20; k++) insert.run(who, Buffer.alloc(8192, k)); });
      let rows = 0;
      // Until this process's thread has checkpointed 10 times (the other's commits count in its backlog too).
      while (checkpoints.done() < 10) {
        if (rows > 100000) throw new Error('only ' + checkpoints.done() + ' checkpoints in ' + rows + ' rows');
        write();
        rows += 20;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      await checkpoints.close();
      raw.close();
      marks.close();
      console.log(JSON.stringify({ rows, checkpoints: checkpoints.done() }));
    `;
    const run = (who: string) =>
      new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code, file, who]);
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
        child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
        child.on('exit', (status) => resolve({ status, stdout, stderr }));
      });
    const [a, b] = await Promise.all([run('a'), run('b')]);
    for (const r of [a, b]) {
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
    }
    const wrote = [a, b].map((r) => JSON.parse(r.stdout) as { rows: number; checkpoints: number });
    for (const w of wrote) expect(w.checkpoints).toBeGreaterThanOrEqual(10);
    const db = new Database(file);
    const byWho = db.prepare('SELECT who, count(*) AS n FROM t GROUP BY who ORDER BY who').all();
    expect(byWho).toEqual([
      { who: 'a', n: wrote[0]!.rows },
      { who: 'b', n: wrote[1]!.rows },
    ]);
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    db.close();
  }, 120_000);

  it('ok/a Db on a file checkpoints aside, and closes with its thread; an in-memory one has none', async () => {
    const dir = scratchDir();
    const db = await openDatabase({ url: join(dir, 'd.db') });
    const { rows } = await sql<{ wal_autocheckpoint: number }>`PRAGMA wal_autocheckpoint`.execute(db.kysely);
    expect(rows[0]?.wal_autocheckpoint).toBe(FALLBACK_FRAMES);
    await db.close();
    const memory = await openDatabase({ url: ':memory:' });
    const inMemory = await sql<{ wal_autocheckpoint: number }>`PRAGMA wal_autocheckpoint`.execute(memory.kysely);
    expect(inMemory.rows[0]?.wal_autocheckpoint).not.toBe(FALLBACK_FRAMES);
    await memory.close();
  });
});
