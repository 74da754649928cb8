import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDialects } from '../../test/support/databases.js';
import type { Db } from './database.js';
import { MailRepo } from './mail-repo.js';
import { mail } from './migrations/0005-mail.js';

/**
 * A migrated database with mail_outbox. Creates the table itself while 0005-mail is not yet in
 * the migration list; once it is, the migration has made it and this does nothing.
 */
async function withMailOutbox(db: Db): Promise<Db> {
  const tables = await db.kysely.introspection.getTables();
  if (!tables.some((t) => t.name === 'mail_outbox')) await mail(db.dialect).up(db.kysely as unknown as Kysely<unknown>);
  return db;
}

describe.each(testDialects())('MailRepo on $dialect', ({ open }) => {
  let db: Db;
  let repo: MailRepo;
  beforeAll(async () => {
    db = await withMailOutbox(await open());
    repo = new MailRepo(db);
  });
  afterAll(async () => {
    await db.close();
  });

  const base = {
    to: 'admin@example.test',
    subject: 'Approve',
    text: 'Line one\nLine two: ünïcode',
    kind: 'dcv.approval',
  };

  it('ok/records a mail in the outbox and reads it back', async () => {
    const id = await repo.insert({ ...base, customerId: 7, orderId: 70, createdAt: 1_000 });
    expect(id).toEqual(expect.any(Number));
    expect(await repo.list({ limit: 10, orderId: 70 })).toEqual([
      {
        id,
        customerId: 7,
        orderId: 70,
        to: base.to,
        subject: 'Approve',
        text: base.text,
        kind: 'dcv.approval',
        status: 'outbox',
        error: null,
        createdAt: 1_000,
        sentAt: null,
      },
    ]);
  });

  it('ok/customer and order are optional', async () => {
    const id = await repo.insert({ ...base, kind: 'test', createdAt: 1_001 });
    const row = (await repo.list({ limit: 100 })).find((r) => r.id === id);
    expect(row).toMatchObject({ customerId: null, orderId: null, status: 'outbox' });
  });

  it('ok/marks a mail sent, or failed with why; sending later clears the error', async () => {
    const id = await repo.insert({ ...base, orderId: 71, createdAt: 1_002 });
    await repo.markFailed(id, 'connect ECONNREFUSED 127.0.0.1:1');
    expect((await repo.list({ limit: 1, orderId: 71 }))[0]).toMatchObject({
      status: 'failed',
      error: 'connect ECONNREFUSED 127.0.0.1:1',
      sentAt: null,
    });
    await repo.markSent(id, 1_005);
    expect((await repo.list({ limit: 1, orderId: 71 }))[0]).toMatchObject({
      status: 'sent',
      error: null,
      sentAt: 1_005,
    });
  });

  it('ok/lists the newest first, within the limit, by order or customer', async () => {
    const ids: number[] = [];
    for (const [i, at] of [2_000, 2_002, 2_001].entries()) {
      ids.push(
        await repo.insert({ ...base, subject: `s${i}`, customerId: 9, orderId: i === 0 ? 90 : 91, createdAt: at }),
      );
    }
    // Two mails in the same second: the later id first.
    const sameSecond = await repo.insert({ ...base, subject: 's3', customerId: 9, orderId: 91, createdAt: 2_002 });
    expect((await repo.list({ limit: 10, customerId: 9 })).map((r) => r.id)).toEqual([
      sameSecond,
      ids[1],
      ids[2],
      ids[0],
    ]);
    expect((await repo.list({ limit: 2, customerId: 9 })).map((r) => r.id)).toEqual([sameSecond, ids[1]]);
    expect((await repo.list({ limit: 10, orderId: 90 })).map((r) => r.id)).toEqual([ids[0]]);
    expect((await repo.list({ limit: 10, orderId: 91, customerId: 9 })).map((r) => r.id)).toEqual([
      sameSecond,
      ids[1],
      ids[2],
    ]);
    expect(await repo.list({ limit: 10, customerId: 999 })).toEqual([]);
    expect((await repo.list({ limit: 1 }))[0]?.id).toBe(sameSecond);
  });

  it('fail/refuses a limit that is not a positive whole number', async () => {
    await expect(repo.list({ limit: 0 })).rejects.toThrow(/limit/);
    await expect(repo.list({ limit: 1.5 })).rejects.toThrow(/limit/);
  });

  it('ok/keeps long bodies whole', async () => {
    const text = 'x'.repeat(100_000);
    const id = await repo.insert({ ...base, text, orderId: 72, createdAt: 3_000 });
    expect((await repo.list({ limit: 1, orderId: 72 }))[0]).toMatchObject({ id, text });
  });

  it('ok/has its indexes', async () => {
    const names =
      db.dialect === 'postgres'
        ? (
            await sql<{
              name: string;
            }>`select indexname as name from pg_indexes where tablename = 'mail_outbox'`.execute(db.kysely)
          ).rows
        : (
            await sql<{
              name: string;
            }>`select name from sqlite_master where type = 'index' and tbl_name = 'mail_outbox'`.execute(db.kysely)
          ).rows;
    expect(names.map((n) => n.name)).toEqual(expect.arrayContaining(['mail_outbox_order', 'mail_outbox_created']));
  });
});
