// A change of the CA hierarchy made by one process (a distrust and its replacement, `certdesk ca
// distrust` or `ca init`) reaches every other process at once: each loads the hierarchy again, so
// none goes on issuing under the distrusted intermediate until it is restarted. Two sets of
// services on one PostgreSQL database, each with its own LISTEN connection.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { checkCsr } from '../src/ca/index.js';
import { loadConfig } from '../src/config/index.js';
import { createServices, type Services } from '../src/main.js';
import { testCaKeys } from './support/ca-fixture.js';
import { newEcCsr } from './support/csr.js';
import { scratchPostgresDatabase } from './support/databases.js';

const PG = process.env.CERTDESK_TEST_DATABASE_URL;
if (PG === undefined || PG === '')
  console.warn('CA hierarchy news test not run: it needs PostgreSQL (CERTDESK_TEST_DATABASE_URL is not set)');

describe.skipIf(PG === undefined || PG === '')('a changed CA hierarchy reaches every process', () => {
  let scratch: Awaited<ReturnType<typeof scratchPostgresDatabase>>;
  let a: Services;
  let b: Services;
  let env: Record<string, string>;
  beforeAll(async () => {
    scratch = await scratchPostgresDatabase(PG!);
    env = {
      CERTDESK_DATABASE_URL: scratch.url,
      CERTDESK_DATA_DIR: '/nonexistent-test-data',
      CERTDESK_DNS_SERVERS: '127.0.0.1:9',
      CERTDESK_CA_KEY_FILE: join(mkdtempSync(join(tmpdir(), 'certdesk-kek-')), 'ca-keys.secret'),
    };
    // The default recheck (60 s) is longer than the waits below: what they see came by the broadcast.
    const config = loadConfig(env);
    a = await createServices(config);
    await a.ca.init({ keyPairs: testCaKeys() });
    b = await createServices(config);
  }, 120_000);
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await scratch?.drop();
  });

  it('ok/after a distrust and its replacement through one process, the other signs under the replacement at once', async () => {
    const csr = checkCsr(newEcCsr());
    const names = ['www.certdesk-test.com']; // newEcCsr's
    const issue = (s: Services) =>
      s.ca.issue({
        csr,
        product: { code: 'TrustPoint.DV', brand: 'TrustPoint', type: 'SSL', validationLevel: 'DV' },
        signatureHashAlgorithm: 'SHA256-FULL-CHAIN',
        dnsNames: names,
      });
    expect((await issue(b)).chainIds[0]).toBe('trustpoint-rsa-int-1');
    const now = a.clock.nowSeconds();
    await a.ca.distrust('trustpoint-rsa-int-1', now - 60, now + 86_400);
    expect(await a.ca.init({ keyPairs: testCaKeys(), rsaRootBits: 2048, rsaIntermediateBits: 2048 })).toEqual([
      'trustpoint-rsa-int-2',
    ]);
    expect((await issue(a)).chainIds[0]).toBe('trustpoint-rsa-int-2');
    // The news travels by LISTEN/NOTIFY: a second at most, not a restart.
    await vi.waitFor(async () => expect((await issue(b)).chainIds[0]).toBe('trustpoint-rsa-int-2'), {
      timeout: 10_000,
      interval: 100,
    });
    expect(b.ca.distrustMarks().get('trustpoint-rsa-int-1')).toEqual({ phase1: now - 60, phase2: now + 86_400 });
  });

  it('ok/a change whose news were lost (stored, never announced) is loaded within CERTDESK_CA_RECHECK_SECONDS', async () => {
    const c = await createServices(loadConfig({ ...env, CERTDESK_CA_RECHECK_SECONDS: '1' }));
    try {
      const id = 'sectra-ecc-int-1';
      expect(c.ca.list().some((info) => info.id === id)).toBe(true);
      expect(c.ca.distrustMarks().has(id)).toBe(false);
      // As a process killed between its commit and its announcement leaves it.
      const now = a.clock.nowSeconds();
      await a.db.kysely
        .updateTable('ca_certificates')
        .set({ distrust_phase1: now - 60, distrust_phase2: null })
        .where('id', '=', id)
        .execute();
      await vi.waitFor(() => expect(c.ca.distrustMarks().get(id)).toEqual({ phase1: now - 60, phase2: null }), {
        timeout: 15_000,
        interval: 100,
      });
    } finally {
      await c.close();
    }
  });

  it('fail/a stored hierarchy that cannot be loaded is logged, and the one loaded before stays in use', async () => {
    const warnings: { msg: string; err?: { message?: string } }[] = [];
    const logger = pino(
      { level: 'warn' },
      { write: (line: string) => void warnings.push(JSON.parse(line) as (typeof warnings)[number]) },
    );
    const c = await createServices(loadConfig({ ...env, CERTDESK_CA_RECHECK_SECONDS: '1' }), { logger });
    try {
      const before = c.ca.list().map((info) => info.id);
      // A CA certificate whose key this process's key file does not open (sealed under another,
      // as after a key file mix-up in one of the deployment's processes).
      const row = await a.db.kysely
        .selectFrom('ca_certificates')
        .selectAll()
        .where('id', '=', 'trustpoint-rsa-int-1')
        .executeTakeFirstOrThrow();
      const key = await a.db.kysely
        .selectFrom('ca_keys')
        .selectAll()
        .where('id', '=', row.key_id)
        .executeTakeFirstOrThrow();
      await a.db.kysely
        .insertInto('ca_keys')
        .values({ ...key, id: 'foreign-key' })
        .execute();
      await a.db.kysely
        .insertInto('ca_certificates')
        .values({ ...row, id: 'trustpoint-rsa-int-foreign', key_id: 'foreign-key', generation: 99 })
        .execute();
      await vi.waitFor(() => expect(warnings.some((w) => /CA hierarchy again failed/.test(w.msg))).toBe(true), {
        timeout: 15_000,
        interval: 100,
      });
      expect(warnings.find((w) => /CA hierarchy again failed/.test(w.msg))?.err?.message).toMatch(/foreign-key/);
      expect(c.ca.list().map((info) => info.id)).toEqual(before);
    } finally {
      await c.close();
      await a.db.kysely.deleteFrom('ca_certificates').where('id', '=', 'trustpoint-rsa-int-foreign').execute();
      await a.db.kysely.deleteFrom('ca_keys').where('id', '=', 'foreign-key').execute();
    }
  });
});
