// The CA's first start: a half-made hierarchy completed, two processes creating one at once,
// readiness, which commands may make keys, and one real first `certdesk serve`.
import { execFile, spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { checkCsr, type BuiltinCa, type KeyStore } from '../src/ca/index.js';
import { loadConfig } from '../src/config/index.js';
import { FixedClock } from '../src/core/index.js';
import { createServices, createWebApp, initCa, type Services } from '../src/main.js';
import { openDatabase, type Db } from '../src/storage/index.js';
import { TEST_NOW } from './support/app.js';
import { otherTestCaKeys, testCaKeys } from './support/ca-fixture.js';
import { testCsr } from './support/csr.js';
import { testDialects } from './support/databases.js';

const silent = pino({ level: 'silent' });
const run = promisify(execFile);
const BIN = new URL('../bin/certdesk', import.meta.url).pathname;
const cleanEnv = () => Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CERTDESK_')));

/** Every certificate of the hierarchy is signed by its parent's key and certifies its own stored key. */
function expectConsistent(ca: BuiltinCa): void {
  const list = ca.list();
  for (const c of list) {
    const cert = new X509Certificate(c.pem);
    expect(Buffer.from(cert.publicKey.export({ type: 'spki', format: 'der' })), c.id).toEqual(
      Buffer.from(ca.signingKey(c.keyId)!.spki),
    );
    const parent = list.find((p) => p.id === (c.parent ?? c.id))!;
    expect(cert.verify(new X509Certificate(parent.pem).publicKey), `${c.id} signed by ${parent.id}`).toBe(true);
  }
}

describe.each(testDialects())('CA first start on $dialect', (dialect) => {
  const open: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    for (const o of open.splice(0).reverse()) await o.close();
  });
  /** Services over `db` as another process would build them: its own BuiltinCa, the shared key file. */
  const keyFile = () => join(mkdtempSync(join(tmpdir(), 'certdesk-kek-')), 'ca-keys.secret');
  async function processOn(db: Db, file: string): Promise<Services> {
    const config = loadConfig({
      CERTDESK_DATA_DIR: '/nonexistent-test-data',
      CERTDESK_DNS_SERVERS: '127.0.0.1:9',
      CERTDESK_CA_KEY_FILE: file,
    });
    const services = await createServices(config, { db, clock: new FixedClock(TEST_NOW) });
    open.push({ close: () => services.ca.flush() });
    return services;
  }
  async function database(): Promise<Db> {
    const db = await dialect.open();
    open.push(db);
    return db;
  }

  it('ok/a hierarchy a crash left half made is completed at the next start from the stored keys: only the missing key is made', async () => {
    const db = await database();
    const file = keyFile();
    await (await processOn(db, file)).ca.init({ keyPairs: testCaKeys() });
    // The crash: the last certificates were not stored, nor one key.
    await db.kysely
      .deleteFrom('ca_certificates')
      .where('id', 'in', ['trustpoint-codesign-int-1', 'trustpoint-smime-int-1', 'sectra-ecc-int-x-1'])
      .execute();
    await db.kysely.deleteFrom('ca_keys').where('id', '=', 'trustpoint-smime-int-1').execute();

    const next = await processOn(db, file);
    expect(next.ca.isInitialized()).toBe(false);
    const asked: string[] = [];
    const keys = testCaKeys();
    await initCa(next.ca, silent, next.config, (id, algorithm) => {
      asked.push(id);
      return keys(id, algorithm);
    });
    expect(asked).toEqual(['trustpoint-smime-int-1']);
    expect(next.ca.isInitialized()).toBe(true);
    expect(next.ca.list().map((c) => c.id)).toEqual(
      expect.arrayContaining(['trustpoint-codesign-int-1', 'trustpoint-smime-int-1', 'sectra-ecc-int-x-1']),
    );
    expectConsistent(next.ca);
  });

  it('race/a load that read the keys before init stored its own, and applies while init signs, takes nothing from init', async () => {
    const services = await processOn(await database(), keyFile());
    // The CA's own key store (a seam of ours): its reads wait for `opened` once it is armed.
    const keys = (services.ca as unknown as { o: { keys: KeyStore } }).o.keys;
    const loadAll = keys.loadAll.bind(keys);
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    keys.loadAll = async () => {
      const read = await loadAll();
      await opened;
      return read;
    };
    const make = testCaKeys();
    let load: Promise<void> | undefined;
    const created = await services.ca.init({
      // News of a change elsewhere arrives as the first key is made: a load begins then.
      keyPairs: (id, algorithm) => {
        load ??= services.ca.load();
        return make(id, algorithm);
      },
      // It applies what it read once init has signed its first certificate.
      log: (line) => {
        if (line.startsWith('created')) open();
      },
    });
    await load;
    expect(services.ca.isInitialized()).toBe(true);
    expect(
      services.ca
        .list()
        .map((c) => c.id)
        .sort(),
    ).toEqual([...created].sort());
    expectConsistent(services.ca);
  });

  it('ok/two processes creating the hierarchy at once, with different keys, end with one consistent hierarchy that both issue from', async () => {
    const db = await database();
    const file = keyFile();
    const [a, b] = [await processOn(db, file), await processOn(db, file)];
    await Promise.all([
      initCa(a.ca, silent, a.config, testCaKeys()),
      initCa(b.ca, silent, b.config, otherTestCaKeys()),
    ]);

    const fresh = await processOn(db, file);
    expect(fresh.ca.isInitialized()).toBe(true);
    const ids = fresh.ca
      .list()
      .map((c) => c.id)
      .sort();
    expect(ids.every((id) => id.endsWith('-1'))).toBe(true);
    expect(
      Number(
        (
          await db.kysely
            .selectFrom('ca_keys')
            .select((e) => e.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      ),
    ).toBe(new Set(fresh.ca.list().map((c) => c.keyId)).size);
    expectConsistent(fresh.ca);
    for (const s of [a, b]) {
      expect(
        s.ca
          .list()
          .map((c) => c.id)
          .sort(),
      ).toEqual(ids);
      const leaf = await s.ca.issue({
        csr: checkCsr(testCsr().pem),
        product: { code: 'TrustPoint.DV', brand: 'TrustPoint', type: 'SSL', validationLevel: 'DV' },
        dnsNames: ['www.certdesk-test.com'],
      });
      expect(new X509Certificate(leaf.certificate).verify(new X509Certificate(leaf.intermediate).publicKey)).toBe(true);
    }
  });

  it('ok/GET /readyz answers 503 with the reason until the CA can issue, then 200', async () => {
    const services = await processOn(await database(), keyFile());
    const app = await createWebApp(services, false);
    open.push(app);
    const before = await app.inject({ method: 'GET', url: '/readyz' });
    expect(before.statusCode).toBe(503);
    expect(before.json()).toMatchObject({
      success: false,
      Message: expect.stringMatching(/CA hierarchy is not complete/),
    });
    await services.ca.init({ keyPairs: testCaKeys() });
    expect((await app.inject({ method: 'GET', url: '/readyz' })).json()).toMatchObject({
      success: true,
      status: 'ready',
    });
  });
});

describe('certdesk and the CA keys', () => {
  it('ok/commands that do not sign make no CA key on a fresh data directory', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cli-nokeys-'));
    const env = { ...cleanEnv(), CERTDESK_DATA_DIR: dir };
    await run(
      BIN,
      [
        'customer',
        'create',
        '--name',
        'Acme',
        '--email',
        'ops@acme.example',
        '--currency',
        'EUR',
        '--credit-limit',
        '5000',
        '--json',
      ],
      { env },
    );
    expect(JSON.parse((await run(BIN, ['ca', 'list', '--json'], { env })).stdout)).toEqual({ CACertificates: [] });
    await run(BIN, ['kv-key', 'create', '--customer', '1', '--json'], { env });
    const db = await openDatabase({ url: join(dir, 'certdesk.db') });
    try {
      expect(await db.kysely.selectFrom('ca_keys').select('id').execute()).toEqual([]);
    } finally {
      await db.close();
    }
  }, 120_000);

  it('ok/a first serve on a fresh data directory creates the whole hierarchy, RSA-4096 roots made ahead, and is ready when it listens', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cli-first-serve-'));
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const child = spawn(BIN, ['serve'], {
      env: { ...cleanEnv(), CERTDESK_DATA_DIR: dir, CERTDESK_PORT: String(port), CERTDESK_KV_PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      // A bound on a hung start, not a speed goal: real RSA-4096 prime searches, on whatever else the machine runs.
      for (let i = 0; i < 1800 && !out.includes('listening on') && child.exitCode === null; i++)
        await new Promise((r) => setTimeout(r, 100));
      expect(out).toContain(`listening on http://127.0.0.1:${port}`);
      expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
      expect(out.match(/storing the made-ahead RSA-4096 key \w+-rsa-root-1/g)).toHaveLength(2);
      const root = new X509Certificate(
        Buffer.from(await (await fetch(`http://127.0.0.1:${port}/pki/sectra-rsa-root-1.crt`)).arrayBuffer()),
      );
      expect(root.publicKey.asymmetricKeyDetails?.modulusLength).toBe(4096);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  }, 240_000);
});
