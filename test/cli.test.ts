import { execFile, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/index.js';
import { createServices } from '../src/main.js';
import { caFixtureDataDir } from './support/ca-fixture.js';

const run = promisify(execFile);
const BIN = new URL('../bin/certdesk', import.meta.url).pathname;

/** The binary as an operator runs it, with a clean environment apart from what the test sets. */
function env(dataDir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CERTDESK_')));
  return { ...clean, CERTDESK_DATA_DIR: dataDir, ...extra };
}

// Each test starts several certdesk processes one after another: bounded generously, as CI may run on a loaded machine.
describe('certdesk CLI', { timeout: 180_000 }, () => {
  it('ok/customer create --json prints working credentials; app create narrows scopes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cli-'));
    const { stdout } = await run(
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
      { env: env(dir) },
    );
    const created = JSON.parse(stdout);
    expect(created).toMatchObject({
      CustomerID: 1,
      Username: 'admin-1',
      scopes: 'profile limit read quote order voucher write',
    });
    expect(created.Password).toMatch(/^\S{20}$/);
    expect(created.client_id).toMatch(/^cdc_/);
    expect(created.client_secret).toMatch(/^cds_/);

    const app = JSON.parse(
      (await run(BIN, ['app', 'create', '--customer', '1', '--scopes', 'read,quote', '--json'], { env: env(dir) }))
        .stdout,
    );
    expect(app).toMatchObject({ CustomerID: 1, scopes: 'read quote' });
    const list = JSON.parse((await run(BIN, ['customer', 'list', '--json'], { env: env(dir) })).stdout);
    expect(list.Customers).toHaveLength(1);
  });

  it('ok/customer password-policy and two-factor set the policies; a bad length or customer is one clear line', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cli-'));
    await run(
      BIN,
      [
        'customer',
        'create',
        '--name',
        'Policy',
        '--email',
        'ops@policy.example',
        '--currency',
        'EUR',
        '--credit-limit',
        '0',
      ],
      { env: env(dir) },
    );
    expect(
      JSON.parse(
        (await run(BIN, ['customer', 'two-factor', '--customer', '1', '--require', 'on', '--json'], { env: env(dir) }))
          .stdout,
      ),
    ).toEqual({ CustomerID: 1, RequireTwoFactor: true });
    const set = ['customer', 'password-policy', '--customer', '1', '--min-length'];
    expect(JSON.parse((await run(BIN, [...set, '16', '--json'], { env: env(dir) })).stdout)).toEqual({
      CustomerID: 1,
      PasswordMinLength: 16,
    });
    for (const [args, message] of [
      [[...set, '4'], /from 8 to 128/],
      [['customer', 'password-policy', '--customer', '9', '--min-length', '16'], /no such customer/],
    ] as const) {
      const err = await run(BIN, [...args], { env: env(dir) }).catch((e: { code: number; stderr: string }) => e);
      expect(err).toMatchObject({ code: 1 });
      expect((err as { stderr: string }).stderr).toMatch(message);
    }
  });

  it("ok/audit list shows a customer's events newest first; an unknown customer is one clear line", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cli-'));
    await run(
      BIN,
      [
        'customer',
        'create',
        '--name',
        'Audited',
        '--email',
        'ops@audited.example',
        '--currency',
        'EUR',
        '--credit-limit',
        '0',
      ],
      { env: env(dir) },
    );
    await run(BIN, ['app', 'create', '--customer', '1', '--scopes', 'read'], { env: env(dir) });
    const { Events } = JSON.parse(
      (await run(BIN, ['audit', 'list', '--customer', '1', '--json'], { env: env(dir) })).stdout,
    );
    // customer create writes its application's event before its own.
    expect(Events.map((e: { Action: string }) => e.Action)).toEqual([
      'application.created',
      'customer.created',
      'application.created',
    ]);
    expect(Events[0]).toMatchObject({
      Actor: 'operator',
      At: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
    });
    expect(JSON.stringify(Events)).not.toMatch(/cds_|secret_hash/);
    const err = await run(BIN, ['audit', 'list', '--customer', '7'], { env: env(dir) }).catch(
      (e: { code: number; stderr: string }) => e,
    );
    expect(err).toMatchObject({ code: 1, stderr: expect.stringContaining('no such customer') });
  });

  it("ok/voucher list shows a customer's vouchers with codes masked unless --codes", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cli-'));
    const created = JSON.parse(
      (
        await run(
          BIN,
          [
            'customer',
            'create',
            '--name',
            'Seller',
            '--email',
            'ops@seller.example',
            '--currency',
            'EUR',
            '--credit-limit',
            '500',
            '--json',
          ],
          { env: env(dir) },
        )
      ).stdout,
    );
    // Two vouchers made through the RA over the same data directory, one of them voided.
    const services = await createServices(loadConfig({ CERTDESK_DATA_DIR: dir, CERTDESK_DNS_SERVERS: '127.0.0.1:9' }));
    const principal = await services.oauth.authenticate(
      (
        await services.oauth.token(
          { grantType: 'client_credentials', clientId: created.client_id, clientSecret: created.client_secret },
          null,
        )
      ).access_token,
    );
    const actor = { principal: principal!, clientAddress: '192.0.2.1' };
    const kept = await services.vouchers.create(actor, {
      OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 12, PartnerOrderID: 'kept' },
    });
    const gone = await services.vouchers.create(actor, {
      OrderParameters: { ProductCode: 'TrustPoint.DV', ValidityPeriod: 24 },
    });
    await services.vouchers.void(actor, gone.code);
    await services.close();

    const { Vouchers } = JSON.parse(
      (await run(BIN, ['voucher', 'list', '--customer', '1', '--json'], { env: env(dir) })).stdout,
    );
    expect(Vouchers).toHaveLength(2);
    expect(Vouchers.map((v: { Status: string }) => v.Status)).toEqual(['voided', 'active']);
    expect(Vouchers[1]).toMatchObject({
      VoucherCode: `****-****-****-****-****-${kept.code.slice(-4)}`,
      ProductCode: 'TrustPoint.DV',
      Price: 49,
      Currency: 'EUR',
      PartnerOrderID: 'kept',
    });
    const text = (await run(BIN, ['voucher', 'list', '--customer', '1'], { env: env(dir) })).stdout;
    expect(text).not.toContain(kept.code);
    const full = (await run(BIN, ['voucher', 'list', '--customer', '1', '--codes'], { env: env(dir) })).stdout;
    expect(full).toContain(kept.code);
    expect(full).toContain(gone.code);
  });

  it('fail/bad input is one clear line and a non-zero exit', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cli-'));
    const err = await run(
      BIN,
      ['customer', 'create', '--name', 'X', '--email', 'nope', '--currency', 'EURO', '--credit-limit', '-5', '--json'],
      { env: env(dir) },
    ).catch((e: { code: number; stderr: string }) => e);
    expect(err).toMatchObject({ code: 1 });
    expect((err as { stderr: string }).stderr).toMatch(/^certdesk: .*email.*currency.*credit-limit/);
    const unknown = await run(BIN, ['app', 'create', '--customer', '99', '--scopes', 'read'], { env: env(dir) }).catch(
      (e: { code: number; stderr: string }) => e,
    );
    expect((unknown as { stderr: string }).stderr).toContain('no such customer');
  });

  it('ok/vetting list is empty on a fresh install; approving or rejecting an unknown order is one clear line', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cli-'));
    expect(JSON.parse((await run(BIN, ['vetting', 'list', '--json'], { env: env(dir) })).stdout)).toEqual({
      Orders: [],
    });
    const approve = await run(BIN, ['vetting', 'approve', '42'], { env: env(dir) }).catch(
      (e: { code: number; stderr: string }) => e,
    );
    expect(approve).toMatchObject({ code: 1, stderr: expect.stringMatching(/^certdesk: No order 42/) });
    const reject = await run(BIN, ['vetting', 'reject', 'x', '--reason', 'r'], { env: env(dir) }).catch(
      (e: { code: number; stderr: string }) => e,
    );
    expect(reject).toMatchObject({ code: 1, stderr: expect.stringMatching(/order id/) });
    expect(JSON.parse((await run(BIN, ['mail', 'list', '--json'], { env: env(dir) })).stdout)).toEqual({ Mails: [] });
    const offline = await run(BIN, ['mail', 'resend', '1'], { env: env(dir) }).catch(
      (e: { code: number; stderr: string }) => e,
    );
    expect(offline).toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/^certdesk: No SMTP server is configured/),
    });
    const unknown = await run(BIN, ['mail', 'resend', '1'], {
      env: env(dir, { CERTDESK_SMTP_URL: 'smtp://127.0.0.1:9' }),
    }).catch((e: { code: number; stderr: string }) => e);
    expect(unknown).toMatchObject({ code: 1, stderr: expect.stringMatching(/^certdesk: No mail 1 in the outbox/) });
  });

  it('ok/two processes migrating a fresh SQLite file at once both succeed, and report each migration once between them', async () => {
    const applied = (stdout: string) => /^applied: (.*)$/m.exec(stdout)?.[1]?.split(', ') ?? [];
    const all = applied((await run(BIN, ['migrate'], { env: env(mkdtempSync(join(tmpdir(), 'cli-'))) })).stdout);
    expect(all[0]).toBe('0001-initial');
    const dir = mkdtempSync(join(tmpdir(), 'cli-'));
    const [a, b] = await Promise.all([
      run(BIN, ['migrate'], { env: env(dir) }),
      run(BIN, ['migrate'], { env: env(dir) }),
    ]);
    expect([...applied(a.stdout), ...applied(b.stdout)].sort()).toEqual(all);
  });

  it('fail/timezone, empty credit limit: refused with the field named', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cli-'));
    const err = await run(
      BIN,
      [
        'customer',
        'create',
        '--name',
        'X',
        '--email',
        'x@x.example',
        '--currency',
        'EUR',
        '--credit-limit',
        '',
        '--timezone',
        'Not/AZone',
      ],
      { env: env(dir) },
    ).catch((e: { stderr: string }) => e);
    expect((err as { stderr: string }).stderr).toMatch(/credit-limit.*timezone/);
  });

  it('fail/a port already taken stops every role and exits non-zero', async () => {
    // The run's fixture CA keys: `serve` makes only the CA certificates on its first start.
    const dir = await caFixtureDataDir('cli-');
    const blocker = createServer().listen(0, '127.0.0.1');
    await new Promise((r) => blocker.once('listening', r));
    const taken = (blocker.address() as { port: number }).port;
    try {
      const err = await run(BIN, ['serve'], {
        env: env(dir, { CERTDESK_PORT: '0', CERTDESK_KV_PORT: String(taken), CERTDESK_LOG_LEVEL: 'fatal' }),
        timeout: 20_000,
      }).catch((e: { code: number; stderr: string; killed: boolean }) => e);
      expect(err).toMatchObject({ code: 1, killed: false });
      expect((err as { stderr: string }).stderr).toContain('EADDRINUSE');
    } finally {
      blocker.close();
    }
  });

  it('fail/a bad configuration stops the start with every bad key listed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cli-'));
    const err = await run(BIN, ['serve'], {
      env: env(dir, { CERTDESK_PORT: 'eighty', CERTDESK_TOKEN_TTL: '0', CERTDESK_SMPT_URL: 'x' }),
    }).catch((e: { code: number; stderr: string }) => e);
    const stderr = (err as { stderr: string }).stderr;
    expect(err).toMatchObject({ code: 1 });
    for (const key of ['CERTDESK_PORT', 'CERTDESK_TOKEN_TTL', 'CERTDESK_SMPT_URL']) expect(stderr).toContain(key);
  });

  it('ok/serve runs the API and the hash store, then drains and exits 0 on SIGTERM', async () => {
    const dir = await caFixtureDataDir('cli-');
    const port = 20000 + Math.floor(Math.random() * 20000);
    const kvPort = port + 1;
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
      { env: env(dir) },
    );
    const { KvKey } = JSON.parse(
      (await run(BIN, ['kv-key', 'create', '--customer', '1', '--json'], { env: env(dir) })).stdout,
    );
    expect(KvKey).toMatch(/^cdk_/);
    const child = spawn(BIN, ['serve'], {
      env: env(dir, { CERTDESK_PORT: String(port), CERTDESK_KV_PORT: String(kvPort), CERTDESK_LOG_LEVEL: 'warn' }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      // A bound on a hung start, not a speed goal: on a loaded machine the first start (CA keys) takes a while.
      // Until the last line of the start-up message (stderr may deliver it in several chunks).
      for (let i = 0; i < 900 && !out.includes('customer create') && child.exitCode === null; i++)
        await new Promise((r) => setTimeout(r, 100));
      expect(out).toContain(`listening on http://127.0.0.1:${port}`);
      expect(out).toContain('customer create');
      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(health.status).toBe(200);
      const kvUrl = `http://127.0.0.1:${kvPort}/www.certdesk-test.com`;
      const filed = await fetch(kvUrl, {
        method: 'POST',
        headers: { 'x-api-key': KvKey, 'content-type': 'application/json' },
        body: JSON.stringify({ hash: 'abc123' }),
      });
      expect(await filed.json()).toEqual({ message: 'success' });
      const served = await fetch(kvUrl, { headers: { 'x-api-key': KvKey } });
      expect((await served.text()).trim().split('\n').at(-1)).toBe('abc123');
      // The hash store's own health, without a key, for a load balancer.
      expect((await fetch(`http://127.0.0.1:${kvPort}/healthz`)).status).toBe(200);
      const ready = await fetch(`http://127.0.0.1:${kvPort}/readyz`);
      expect(await ready.json()).toEqual({ status: 'ready', checks: { database: 'ok' } });
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  }, 150_000);
});
