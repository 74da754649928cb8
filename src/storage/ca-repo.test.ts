import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDialects } from '../../test/support/databases.js';
import { plans } from '../../test/support/query-plans.js';
import { CaRepo } from './ca-repo.js';
import type { Db } from './database.js';

const NOW = 1_800_000_000;
const DAY = 86_400;

describe.each(testDialects())('CaRepo.revokedOf on $dialect', ({ dialect, open }) => {
  let db: Db;
  let repo: CaRepo;
  beforeAll(async () => {
    db = await open();
    repo = new CaRepo(db);
  });
  afterAll(async () => {
    await db.close();
  });

  let serials = 0;
  async function leaf(
    keyId: string,
    o: { revokedAt?: number; reason?: number; notAfter?: number; serial?: string } = {},
  ) {
    const serial = o.serial ?? `5E${(++serials).toString(16).toUpperCase().padStart(30, '0')}`;
    const { id } = await db.kysely
      .insertInto('certificates')
      .values({
        order_id: null,
        customer_id: null,
        issuer_id: `${keyId}-cert`,
        key_id: keyId,
        serial,
        pem: '',
        chain_pem: '',
        pkcs7_pem: '',
        not_before: NOW - DAY,
        not_after: o.notAfter ?? NOW + 90 * DAY,
        revoked_at: null,
        revocation_reason: null,
        created_at: NOW - DAY,
        chain_ids: null,
        profile: 'tls-dv',
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    if (o.revokedAt !== undefined) expect(await repo.revoke(id, o.revokedAt, o.reason ?? null)).toBe(true);
    return serial;
  }

  it('ok: the revoked, unexpired leaves of one key, in revocation order; none of another key', async () => {
    const later = await leaf('key-a', { revokedAt: NOW - 10, reason: 1 });
    await leaf('key-a');
    const earlier = await leaf('key-a', { revokedAt: NOW - 20 });
    await leaf('key-a', { revokedAt: NOW - 30, notAfter: NOW - 1 }); // expired: may leave the CRL
    await leaf('key-b', { revokedAt: NOW - 40 });
    expect(await repo.revokedOf('key-a', NOW)).toEqual([
      { serial: earlier, revokedAt: NOW - 20, reason: null },
      { serial: later, revokedAt: NOW - 10, reason: 1 },
    ]);
    expect(await repo.revokedOf('key-c', NOW)).toEqual([]);
  });

  it('ok: leaves revoked in the same second come by serial, not in the order they were stored (one order for every read: crlEntriesDigest)', async () => {
    const high = await leaf('key-d', { serial: '7F00000000000000000000000000000B', revokedAt: NOW - 5 });
    const low = await leaf('key-d', { serial: '7F00000000000000000000000000000A', revokedAt: NOW - 5 });
    expect((await repo.revokedOf('key-d', NOW)).map((e) => e.serial)).toEqual([low, high]);
  });

  it('reads the index of revoked certificates only (0022), not the table', async () => {
    const [read] = await plans(db, (spy) => new CaRepo(spy).revokedOf('key-a', NOW));
    if (dialect === 'sqlite') {
      // In revocation order from the index; only entries revoked in the same second are sorted by serial.
      expect(read!.plan.split('\n')).toEqual([
        'SEARCH certificates USING INDEX certificates_revoked_by_key (key_id=? AND revoked_at>?)',
        'USE TEMP B-TREE FOR LAST TERM OF ORDER BY',
      ]);
    } else {
      expect(read!.plan).toContain('certificates_revoked_by_key');
      expect(read!.plan).not.toContain('Seq Scan');
    }
  });

  it('keeps no index entry for a certificate that is not revoked', async () => {
    const indexes =
      dialect === 'sqlite'
        ? (
            await db.kysely
              .selectFrom('sqlite_master' as never)
              .select(['name' as never, 'sql' as never])
              .where('tbl_name' as never, '=', 'certificates' as never)
              .execute()
          ).map((r) => `${String((r as { name: string }).name)} ${String((r as { sql: string | null }).sql)}`)
        : (
            await db.kysely
              .selectFrom('pg_indexes' as never)
              .select(['indexname' as never, 'indexdef' as never])
              .where('tablename' as never, '=', 'certificates' as never)
              .execute()
          ).map(
            (r) => `${String((r as { indexname: string }).indexname)} ${String((r as { indexdef: string }).indexdef)}`,
          );
    expect(indexes.some((i) => i.includes('certificates_issuer_revoked'))).toBe(false);
    const revoked = indexes.find((i) => i.startsWith('certificates_revoked_by_key'));
    expect(revoked).toMatch(/WHERE.*revoked_at.* IS NOT NULL/i);
  });
});
