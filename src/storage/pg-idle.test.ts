// A PostgreSQL connection nobody uses stays open IDLE_CONNECTION_MS (five minutes), with the
// statements prepared on it, so traffic in bursts a minute apart does not pay a new connection and
// its statements again each time; it sends TCP keepalive probes, so that a NAT or load balancer
// on the way does not drop it silently meanwhile; and an idle connection does not keep a process
// alive.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { scratchPostgresDatabase } from '../../test/support/databases.js';
import { IDLE_CONNECTION_MS, KEEPALIVE_AFTER_MS, openDatabase } from './database.js';

const url = process.env.CERTDESK_TEST_DATABASE_URL;
if (url === undefined || url === '')
  console.warn('idle connection tests not run: they are PostgreSQL only and CERTDESK_TEST_DATABASE_URL is not set');

const CHILD = new URL('../../test/support/pg-idle-child.ts', import.meta.url).pathname;

describe.skipIf(url === undefined || url === '')('idle PostgreSQL connections', () => {
  let scratch: Awaited<ReturnType<typeof scratchPostgresDatabase>>;
  beforeAll(async () => {
    scratch = await scratchPostgresDatabase(url!);
  });
  afterAll(async () => {
    await scratch?.drop();
  });

  it('ok/a connection idle for a minute still answers, its statements prepared; one idle past IDLE_CONNECTION_MS is closed', async () => {
    // Only the pool's timers are faked; sockets and the server are real.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const db = await openDatabase({ url: scratch.url, poolSize: 1 });
    try {
      const backend = async () =>
        (await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(db.kysely)).rows[0]!.pid;
      const first = await backend();
      vi.advanceTimersByTime(60_000);
      expect(await backend()).toBe(first);
      const prepared = await sql<{
        statement: string;
      }>`SELECT statement FROM pg_prepared_statements`.execute(db.kysely);
      expect(prepared.rows.map((r) => r.statement)).toContain('SELECT pg_backend_pid() AS pid');

      vi.advanceTimersByTime(IDLE_CONNECTION_MS - 1);
      expect(await backend()).toBe(first);
      vi.advanceTimersByTime(IDLE_CONNECTION_MS);
      expect(await backend()).not.toBe(first);
    } finally {
      vi.useRealTimers();
      await db.close();
    }
  });

  it('ok/an idle connection has its TCP keepalive timer running, due within KEEPALIVE_AFTER_MS', async (ctx) => {
    const db = await openDatabase({ url: scratch.url, poolSize: 1 });
    try {
      // The connection's own port as the server sees it; null over a Unix socket.
      const port = (await sql<{ port: number | null }>`SELECT inet_client_port() AS port`.execute(db.kysely)).rows[0]!
        .port;
      const tables = ['/proc/net/tcp', '/proc/net/tcp6'].filter((f) => existsSync(f));
      if (port === null || tables.length === 0) {
        console.warn('keepalive test not run: it reads the TCP socket table of Linux, over a TCP connection');
        ctx.skip();
      }
      const local = `:${port!.toString(16).toUpperCase().padStart(4, '0')}`;
      // sl local rem st tx:rx tr:when …: timer 02 is the keepalive timer; `when` in 1/100 s.
      const row = tables
        .flatMap((f) => readFileSync(f, 'utf8').split('\n').slice(1))
        .map((line) => line.trim().split(/\s+/))
        .find((cols) => cols[1]?.endsWith(local) === true && cols[3] === '01');
      expect(row, `no established socket on local port ${port}`).toBeDefined();
      const [timer, when] = row![5]!.split(':');
      expect(timer).toBe('02');
      expect(parseInt(when!, 16) * 10).toBeLessThanOrEqual(KEEPALIVE_AFTER_MS);
    } finally {
      await db.close();
    }
  });

  it('ok/a process that leaves its connections idle without closing the database ends', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, scratch.url], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      let out = '';
      child.stdout.on('data', (b: Buffer) => (out += b.toString()));
      // Held by an idle connection it would end only after IDLE_CONNECTION_MS; the test's own
      // timeout is far below that.
      const code = await new Promise<number | null>((resolve, reject) => {
        child.on('exit', resolve);
        child.on('error', reject);
      });
      expect(out).toBe('done\n');
      expect(code).toBe(0);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  }, 120_000);
});
