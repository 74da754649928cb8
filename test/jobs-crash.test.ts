import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { holderHost, holderIsGone, systemClock, type JobId } from '../src/core/index.js';
import { Worker, type Handlers } from '../src/jobs/index.js';
import { migrateToLatest, openDatabase, type Db } from '../src/storage/index.js';
import { JobsRepo } from '../src/storage/jobs-repo.js';

const CHILD = fileURLToPath(new URL('./support/worker-child.ts', import.meta.url));
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const run = promisify(execFile);

/** Why a PID namespace of its own cannot be made here (unshare needs Linux and root), else undefined. */
const unshareUnavailable = (() => {
  try {
    execFileSync('unshare', ['--pid', '--fork', '--mount-proc', 'true'], { stdio: 'ignore' });
    return undefined;
  } catch (e) {
    return `unshare --pid failed (${(e as Error).message.split('\n')[0]})`;
  }
})();
if (unshareUnavailable !== undefined) console.warn(`PID namespace test not run: ${unshareUnavailable}`);

/** The first stdout line of `child`, or a rejection after `ms`. */
async function firstLine(child: ChildProcess, ms: number): Promise<string> {
  const lines = createInterface({ input: child.stdout! });
  const timeout = setTimeout(() => lines.emit('error', new Error(`no output from the child in ${ms} ms`)), ms);
  try {
    const [line] = (await once(lines, 'line')) as [string];
    return line;
  } finally {
    clearTimeout(timeout);
    lines.close();
  }
}

describe('a worker killed in the middle of a job (SQLite file, two processes)', () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step();
  });

  /** A worker child that claims the queued job, announces it, hangs, and is killed there. */
  async function killedHolder(
    lease: number,
  ): Promise<{ db: Db; repo: JobsRepo; id: JobId; pid: number; leaseExpiresAt: number }> {
    const dir = mkdtempSync(join(tmpdir(), 'certdesk-crash-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const db: Db = await openDatabase({ url: join(dir, 'certdesk.db') });
    cleanup.push(() => db.close());
    await migrateToLatest(db);
    const repo = new JobsRepo(db);
    const { id } = await repo.enqueue(
      { name: 'housekeeping.purge', payload: {}, runAt: systemClock.nowSeconds() },
      systemClock.nowSeconds(),
    );
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, join(dir, 'certdesk.db'), String(lease)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    cleanup.push(() => void child.kill('SIGKILL'));
    expect(await firstLine(child, 10_000)).toBe(`claimed ${id}`);
    child.kill('SIGKILL');
    await once(child, 'exit');
    const held = await repo.byId(id);
    expect(held).toMatchObject({ status: 'running', attempts: 1 });
    expect(held?.leaseOwner).toContain(`:${child.pid}:`);
    return { db, repo, id, pid: child.pid!, leaseExpiresAt: held!.leaseExpiresAt! };
  }

  /** A worker here whose one job records its effect in the database (to count how often it ran). */
  function takeOver(
    db: Db,
    repo: JobsRepo,
    options: { isGone?: (owner: string) => boolean } = {},
  ): { worker: Worker; effects: number[] } {
    const effects: number[] = [];
    const handlers = {
      'housekeeping.purge': async (_payload, ctx) => {
        await db.kysely
          .insertInto('audit_events')
          .values({
            at: systemClock.nowSeconds(),
            actor: 'system',
            action: 'test.crash-effect',
            subject: String(ctx.id),
          })
          .execute();
        effects.push(systemClock.nowSeconds());
      },
      'ca.refresh-crls': async () => undefined,
      'order.validate': async () => undefined,
      'order.renew-subscriptions': async () => undefined,
      'notify.reminders': async () => undefined,
      'order.revoke-certificates': async () => undefined,
      'scan.vulnerability': async () => undefined,
      'scan.configuration': async () => undefined,
      'mail.deliver': async () => undefined,
    } satisfies Handlers;
    const worker = new Worker({
      repo,
      handlers,
      clock: systemClock,
      logger: quiet,
      leaseSeconds: 1,
      pollIntervalMs: 100,
      ...options,
    });
    cleanup.push(async () => void (await worker.stop(1000)));
    worker.start();
    return { worker, effects };
  }

  it('loses nothing: when the holder cannot be judged gone, another worker runs the job once the lease has run out, once', async () => {
    const { db, repo, id, leaseExpiresAt } = await killedHolder(1);
    const { worker, effects } = takeOver(db, repo, { isGone: () => false });
    await vi.waitFor(async () => expect((await repo.byId(id))?.status).toBe('done'), { timeout: 4000, interval: 100 });

    expect(effects).toHaveLength(1);
    expect(effects[0]).toBeGreaterThan(leaseExpiresAt);
    expect(await repo.byId(id)).toMatchObject({ attempts: 2, leaseOwner: worker.owner });
    const rows = await db.kysely
      .selectFrom('audit_events')
      .select('subject')
      .where('action', '=', 'test.crash-effect')
      .execute();
    expect(rows).toEqual([{ subject: String(id) }]);
  });

  it('takes the job of a killed process on this host over at once, long before its lease would lapse, and runs it once', async () => {
    // A ten-minute lease: waiting it out would fail the test's timeout many times over.
    const { db, repo, id, pid, leaseExpiresAt } = await killedHolder(600);
    expect(holderIsGone(`${holderHost}:${pid}:x`)).toBe(true);
    const { worker, effects } = takeOver(db, repo);
    await vi.waitFor(async () => expect((await repo.byId(id))?.status).toBe('done'), {
      timeout: 20_000,
      interval: 100,
    });

    expect(effects).toHaveLength(1);
    expect(effects[0]).toBeLessThan(leaseExpiresAt);
    expect(await repo.byId(id)).toMatchObject({ attempts: 2, leaseOwner: worker.owner });
    expect(
      await db.kysely.selectFrom('audit_events').select('subject').where('action', '=', 'test.crash-effect').execute(),
    ).toEqual([{ subject: String(id) }]);
  });

  it('never judges a live process, this one or another on this host, gone', () => {
    expect(holderIsGone(`${holderHost}:${process.pid}:x`)).toBe(false);
    expect(holderIsGone(`${holderHost}:${process.ppid}:x`)).toBe(false);
    expect(holderIsGone(`another-host.invalid:1:x`)).toBe(false);
    expect(holderIsGone('garbage')).toBe(false);
  });

  it('never judges a holder in another PID namespace of this host gone (a container sharing the host name)', async () => {
    const { pid } = await killedHolder(600);
    expect(holderIsGone(`${holderHost}:${pid}:x`)).toBe(true);
    // The same dead process id, named from another namespace, or without one (before namespaces
    // were part of the name): that id may be alive over there.
    expect(holderIsGone(`${hostname()}:${pid}:x`)).toBe(false);
    expect(holderIsGone(`${hostname()}.pidns-1:${pid}:x`)).toBe(false);
  });

  it.skipIf(unshareUnavailable !== undefined)(
    'a process in a PID namespace of its own names another host',
    async () => {
      // Such a process sees itself as pid 1 or so: without the namespace in the name, a holder here
      // would find that id dead and take its live work over (two runs of one job at once).
      const inside = await run('unshare', [
        '--pid',
        '--fork',
        '--mount-proc',
        process.execPath,
        '--import',
        'tsx',
        '-e',
        "import('./src/core/holders.ts').then((m) => console.log(m.newHolderId()))",
      ]);
      const holder = inside.stdout.trim();
      expect(holder.split(':')[0]).not.toBe(holderHost);
      expect(holder.split(':')[0]!.startsWith(`${hostname()}.pidns-`)).toBe(true);
      expect(holderIsGone(holder)).toBe(false);
    },
  );
});
