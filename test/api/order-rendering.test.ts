import { execFileSync } from 'node:child_process';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openDatabase, type Db } from '../../src/storage/index.js';
import { sqliteFile, testDialects, type TestDialect } from '../support/databases.js';
import { dnsOrderBody, issuingContext, type IssuingContext } from '../support/issuing-context.js';

// GET /Order/{id} sends a body rendered before while the order's change tag (migration 0021) is
// unchanged: read from the database on every request, or on SQLite kept while the database's
// commit mark says nothing was committed since (storage/sqlite-commits.ts). These tests change
// what an order shows in every way there is — the service's own calls, and SQL beside it standing
// for another process or the worker — and want the change in the very next answer. On a SQLite
// file that SQL goes through a second connection, as another process's would.

interface Variant extends TestDialect {
  readonly name: string;
  readonly file?: () => string;
}
const file = sqliteFile();
const variants: Variant[] = [
  ...testDialects().map((d) => ({ ...d, name: d.dialect })),
  { ...file, name: 'a SQLite file, written by a second connection' },
];

/** The parts of OrderInfo these tests look at. */
interface Info {
  OrderStatus: { MajorStatus: string; MinorStatus: string; UpdateDate: string; EndDate: string };
  DCVStatus: { Problem?: string }[];
  ConfigurationAssessment: { Ranking: string };
  scheduledForReplacement: { eventCaDistrust: { Phase1: string } };
}

describe.each(variants)('GET /Order/{id}: a kept body never outlives a change, on $name', (variant) => {
  let ctx: IssuingContext;
  /** Where the SQL beside the service writes: the service's connection, or a second one to its file. */
  let writer: Db;
  beforeAll(async () => {
    ctx = await issuingContext(variant, 'Rendering');
    writer = variant.file === undefined ? ctx.t.db : await openDatabase({ url: variant.file() });
  });
  afterAll(async () => {
    if (writer !== ctx.t.db) await writer.close();
    await ctx.close();
  });

  const place = async (): Promise<number> => {
    const res = await ctx.t.call(ctx.c.token, { method: 'POST', url: '/rest/v1/Order', payload: dnsOrderBody() });
    expect(res.statusCode).toBe(200);
    return res.json().CertCenterOrderID as number;
  };
  const read = async (id: number, query = '', token = ctx.c.token) => {
    const res = await ctx.t.call(token, { method: 'GET', url: `/rest/v1/Order/${id}${query}` });
    expect(res.statusCode).toBe(200);
    return res.json().OrderInfo as Info;
  };

  it('ok/the same body twice while nothing changes; an update of the order row (another process) shows at once', async () => {
    const id = await place();
    const first = await read(id);
    expect(first.OrderStatus.MajorStatus).toBe('COMPLETE');
    expect(await read(id)).toEqual(first);
    await writer.kysely.updateTable('orders').set({ update_date: 1_800_000_000 }).where('id', '=', id).execute();
    expect((await read(id)).OrderStatus.UpdateDate).toBe('2027-01-15T08:00:00Z');
  });

  it("ok/the include flags are kept apart, and a name's DCV status shows at once with includeDCVStatus", async () => {
    const id = await place();
    const plain = await read(id);
    const withDcv = await read(id, '?includeDCVStatus=true');
    expect(plain).not.toHaveProperty('DCVStatus');
    expect(withDcv.DCVStatus.length).toBeGreaterThan(0);
    expect(withDcv.DCVStatus[0]).not.toHaveProperty('Problem');
    // The worker's DCV check, as another process writes it: the name row only.
    await writer.kysely
      .updateTable('order_names')
      .set({ last_problem: 'TXT record not found' })
      .where('order_id', '=', id)
      .execute();
    expect((await read(id, '?includeDCVStatus=true')).DCVStatus[0]!.Problem).toBe('TXT record not found');
    expect(await read(id)).toEqual(plain);
    expect(await read(id, '?includeFulfillment=true')).toHaveProperty('Fulfillment');
  });

  it('ok/a configuration scan shows at once (ConfigurationAssessment); a vulnerability scan changes nothing shown', async () => {
    const id = await place();
    expect(await read(id)).not.toHaveProperty('ConfigurationAssessment');
    const report = (kind: string, grade: string) => ({
      order_id: id,
      customer_id: ctx.c.customerId,
      kind,
      created_at: ctx.t.clock.nowSeconds(),
      engine: 'certdesk-scan 1.0',
      criteria_version: '2026.1',
      grade,
      critical: '[]',
      report: '{}',
    });
    await writer.kysely.insertInto('scan_reports').values(report('vulnerability', 'F')).execute();
    expect(await read(id)).not.toHaveProperty('ConfigurationAssessment');
    await writer.kysely.insertInto('scan_reports').values(report('configuration', 'A')).execute();
    expect((await read(id)).ConfigurationAssessment.Ranking).toBe('A');
  });

  it('ok/time alone turns a kept COMPLETE body EXPIRED past its EndDate', async () => {
    const id = await place();
    const before = await read(id);
    expect(before.OrderStatus.MinorStatus).not.toBe('EXPIRED');
    const end = Date.parse(before.OrderStatus.EndDate) / 1000;
    const now = ctx.t.clock.nowSeconds();
    try {
      ctx.t.clock.set(end);
      const token = await ctx.t.token(ctx.c);
      expect((await read(id, '', token)).OrderStatus.MinorStatus).toBe(before.OrderStatus.MinorStatus);
      ctx.t.clock.set(end + 1);
      expect((await read(id, '', token)).OrderStatus.MinorStatus).toBe('EXPIRED');
    } finally {
      ctx.t.clock.set(now);
    }
    expect((await read(id)).OrderStatus.MinorStatus).toBe(before.OrderStatus.MinorStatus);
  });

  it('ok/a cancel through the API shows at once', async () => {
    const id = await place();
    await read(id);
    const res = await ctx.t.call(ctx.c.token, { method: 'DELETE', url: `/rest/v1/Order/${id}` });
    expect(res.statusCode).toBe(200);
    expect((await read(id)).OrderStatus.MajorStatus).toBe('CANCELLED');
  });

  it("fail/another customer's order is not found, kept body or not; a bad id is refused", async () => {
    const id = await place();
    await read(id);
    const other = await ctx.t.customer({ name: 'Other' });
    const res = await ctx.t.call(other.token, { method: 'GET', url: `/rest/v1/Order/${id}` });
    expect(res.statusCode).toBe(404);
    expect(res.json().Message).toMatch(/no such order/);
    const bad = await ctx.t.call(ctx.c.token, { method: 'GET', url: '/rest/v1/Order/12x' });
    expect(bad.statusCode).toBeGreaterThanOrEqual(400);
    expect(bad.statusCode).toBeLessThan(500);
  });

  it('race/readers racing 40 updates by another writer: every read started after an update shows it or a later one', async () => {
    const id = await place();
    const base = 1_800_000_000;
    let committed = -1;
    let stop = false;
    const stale: string[] = [];
    const reader = async () => {
      while (!stop) {
        const floor = committed;
        const shown = Date.parse((await read(id)).OrderStatus.UpdateDate) / 1000 - base;
        if (floor >= 0 && shown < floor) stale.push(`saw ${shown} after ${floor} committed`);
        // In-process requests may never leave the microtask queue: give the writer its turn.
        await new Promise((r) => setImmediate(r));
      }
    };
    const readers = Array.from({ length: 8 }, reader);
    for (let i = 0; i < 40; i++) {
      await writer.kysely
        .updateTable('orders')
        .set({ update_date: base + i })
        .where('id', '=', id)
        .execute();
      committed = i;
      // Let the readers run between updates (as many reads as the machine manages).
      await new Promise((r) => setImmediate(r));
    }
    stop = true;
    await Promise.all(readers);
    expect(stale).toEqual([]);
    expect(Date.parse((await read(id)).OrderStatus.UpdateDate) / 1000).toBe(base + 39);
  });

  it('ok/the counters: every update of an order or a name row moves its version (triggers of 0021)', async () => {
    const id = await place();
    const version = async () =>
      (await ctx.t.db.kysely.selectFrom('orders').select('version').where('id', '=', id).executeTakeFirstOrThrow())
        .version;
    const nameVersion = async () =>
      (
        await ctx.t.db.kysely
          .selectFrom('order_names')
          .select((e) => e.fn.sum<number>('version').as('v'))
          .where('order_id', '=', id)
          .executeTakeFirstOrThrow()
      ).v;
    const v0 = Number(await version());
    await sql`UPDATE orders SET minor_status = minor_status WHERE id = ${id}`.execute(writer.kysely);
    expect(Number(await version())).toBe(v0 + 1);
    const n0 = Number(await nameVersion());
    await sql`UPDATE order_names SET last_problem = NULL WHERE order_id = ${id}`.execute(writer.kysely);
    expect(Number(await nameVersion())).toBeGreaterThan(n0);
    // A name's update leaves its order's row alone (no lock taken on it).
    expect(Number(await version())).toBe(v0 + 1);
  });

  it('ok/a distrust mark on the issuer shows at once (scheduledForReplacement)', async () => {
    const id = await place();
    expect(await read(id)).not.toHaveProperty('scheduledForReplacement');
    const chain = (
      await ctx.t.db.kysely
        .selectFrom('certificates')
        .select('issuer_id')
        .where('order_id', '=', id)
        .executeTakeFirstOrThrow()
    ).issuer_id;
    await ctx.t.services.ca.distrust(chain, 1_900_000_000, null);
    expect((await read(id)).scheduledForReplacement.eventCaDistrust.Phase1).toBe('2030-03-17T17:46:40Z');
  });
});

describe('GET /Order/{id} on a SQLite file: the tag kept by commit mark', () => {
  const dialect = sqliteFile();
  let ctx: IssuingContext;
  beforeAll(async () => {
    ctx = await issuingContext(dialect, 'Marks');
  });
  afterAll(async () => ctx.close());

  const place = async (): Promise<number> => {
    const res = await ctx.t.call(ctx.c.token, { method: 'POST', url: '/rest/v1/Order', payload: dnsOrderBody() });
    expect(res.statusCode).toBe(200);
    return res.json().CertCenterOrderID as number;
  };
  const read = async (id: number, query = '') => {
    const res = await ctx.t.call(ctx.c.token, { method: 'GET', url: `/rest/v1/Order/${id}${query}` });
    expect(res.statusCode).toBe(200);
    return res.json().OrderInfo as Info;
  };

  it('ok/while nothing commits, a polled order costs no read of its tag; a commit anywhere brings the read back', async () => {
    const id = await place();
    await read(id);
    const all = vi.spyOn(ctx.t.db.direct!, 'all');
    try {
      const tagReads = () => all.mock.calls.filter(([text]) => /"version"/.test(text)).length;
      const shown = await read(id);
      await read(id, '?includeDCVStatus=true');
      const before = tagReads();
      expect(await read(id)).toEqual(shown);
      await read(id, '?includeDCVStatus=true');
      expect(tagReads()).toBe(before);
      // Another customer's write elsewhere commits too: the tag is read again, and is the same.
      const other = await ctx.t.customer({ name: 'Elsewhere' });
      expect(other.customerId).not.toBe(ctx.c.customerId);
      expect(await read(id)).toEqual(shown);
      expect(tagReads()).toBe(before + 1);
    } finally {
      all.mockRestore();
    }
  });

  it('ok/a commit by another process shows in the very next answer', async () => {
    const id = await place();
    const first = await read(id);
    expect(first.OrderStatus.MajorStatus).toBe('COMPLETE');
    expect(await read(id)).toEqual(first);
    execFileSync(
      process.execPath,
      [
        '-e',
        "const D = require('better-sqlite3'); const d = new D(process.argv[1]); d.pragma('busy_timeout = 5000'); d.prepare('UPDATE orders SET update_date = 1800000000 WHERE id = ?').run(Number(process.argv[2])); d.close();",
        dialect.file(),
        String(id),
      ],
      { cwd: process.cwd(), stdio: ['ignore', 'ignore', 'inherit'] },
    );
    expect((await read(id)).OrderStatus.UpdateDate).toBe('2027-01-15T08:00:00Z');
  });
});
