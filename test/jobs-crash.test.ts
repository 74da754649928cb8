import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../src/core/index.js';
import { Worker, type Handlers } from '../src/jobs/index.js';
import { migrateToLatest, openDatabase, type Db } from '../src/storage/index.js';
import { JobsRepo } from '../src/storage/jobs-repo.js';

const CHILD = fileURLToPath(new URL('./support/worker-child.ts', import.meta.url));
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

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

  it('loses nothing: another worker runs the job once the lease has run out, and its effect happens once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'certdesk-crash-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const db: Db = await openDatabase({ url: join(dir, 'certdesk.db') });
    cleanup.push(() => db.close());
    await migrateToLatest(db);
    const repo = new JobsRepo(db);
    const { id } = await repo.enqueue({ name: 'housekeeping.purge', payload: {}, runAt: systemClock.nowSeconds() }, systemClock.nowSeconds());

    // Step 1: a child process claims the job and hangs inside its handler; kill it there.
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, join(dir, 'certdesk.db')], { stdio: ['ignore', 'pipe', 'inherit'] });
    cleanup.push(() => void child.kill('SIGKILL'));
    expect(await firstLine(child, 10_000)).toBe(`claimed ${id}`);
    child.kill('SIGKILL');
    await once(child, 'exit');
    const held = await repo.byId(id);
    expect(held).toMatchObject({ status: 'running', attempts: 1 });
    expect(held?.leaseOwner).toContain(`:${child.pid}:`);

    // Step 2: a worker here takes the job over only after the dead child's lease has run out.
    const effects: number[] = [];
    const handlers = {
      'housekeeping.purge': async (_payload, ctx) => {
        await db.kysely.insertInto('audit_events')
          .values({ at: systemClock.nowSeconds(), actor: 'system', action: 'test.crash-effect', subject: String(ctx.id) })
          .execute();
        effects.push(systemClock.nowSeconds());
      },
          'ca.refresh-crls': async () => undefined,
      'order.validate': async () => undefined,
      'order.renew-subscriptions': async () => undefined,
      'notify.reminders': async () => undefined,
    } satisfies Handlers;
    const worker = new Worker({ repo, handlers, clock: systemClock, logger: quiet, leaseSeconds: 1, pollIntervalMs: 100 });
    cleanup.push(async () => void (await worker.stop(1000)));
    worker.start();
    await vi.waitFor(async () => expect((await repo.byId(id))?.status).toBe('done'), { timeout: 4000, interval: 100 });

    expect(effects).toHaveLength(1);
    expect(effects[0]).toBeGreaterThan(held?.leaseExpiresAt ?? Infinity);
    expect(await repo.byId(id)).toMatchObject({ attempts: 2, leaseOwner: worker.owner });
    const rows = await db.kysely.selectFrom('audit_events').select('subject').where('action', '=', 'test.crash-effect').execute();
    expect(rows).toEqual([{ subject: String(id) }]);
  });
});
