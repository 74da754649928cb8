import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { caFixtureDataDir } from './support/ca-fixture.js';

const run = promisify(execFile);
const BIN = new URL('../bin/certdesk', import.meta.url).pathname;
// Holds the run's fixture CA keys (RSA-4096 roots): `ca init` makes the certificates, not the keys.
const dir = await caFixtureDataDir('cli-ca-');
const env = (): NodeJS.ProcessEnv => ({
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CERTDESK_'))),
  CERTDESK_DATA_DIR: dir,
});
const cli = async (args: string[]) => (await run(BIN, args, { env: env() })).stdout;
const fails = (args: string[]) =>
  run(BIN, args, { env: env() }).then(
    () => ({ code: 0, stderr: '' }),
    (e: { code: number; stderr: string }) => e,
  );

// Each test starts several certdesk processes one after another: bounded generously, as CI may run on a loaded machine.
describe('certdesk ca …', { timeout: 180_000 }, () => {
  beforeAll(async () => {
    const init = JSON.parse(await cli(['ca', 'init', '--json'])) as { Created: string[] };
    expect(init.Created).toContain('trustpoint-rsa-root-1');
  }, 120_000);

  it('ok/ca init is idempotent; the key file is 0600; ca list shows issuers, key types and expiry', async () => {
    expect(JSON.parse(await cli(['ca', 'init', '--json']))).toEqual({ Created: [] });
    expect(statSync(join(dir, 'ca-keys.secret')).mode & 0o777).toBe(0o600);
    const list = JSON.parse(await cli(['ca', 'list', '--json'])) as {
      CACertificates: { ID: string; KeyType: string; NotAfter: string; Distrust: unknown }[];
    };
    expect(list.CACertificates.find((c) => c.ID === 'trustpoint-rsa-root-1')).toMatchObject({
      KeyType: 'RSA-4096',
      Distrust: null,
    });
    expect(list.CACertificates.find((c) => c.ID === 'sectra-ecc-int-1')).toMatchObject({ KeyType: 'ECDSA P-256' });
    expect(list.CACertificates.every((c) => /^\d{4}-\d\d-\d\dT/.test(c.NotAfter))).toBe(true);
  });

  it('ok/ca sign prints the Fulfillment fields; ca revoke and ca crl make openssl reject the leaf', async () => {
    execFileSync(
      'openssl',
      [
        'req',
        '-new',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        join(dir, 'k.pem'),
        '-out',
        join(dir, 'r.csr'),
        '-subj',
        '/CN=www.example.com',
        '-addext',
        'subjectAltName=DNS:www.example.com',
      ],
      { stdio: 'pipe' },
    );
    const signed = JSON.parse(
      await cli(['ca', 'sign', '--csr', join(dir, 'r.csr'), '--product', 'TrustPoint.DV', '--json']),
    );
    expect(Object.keys(signed)).toEqual(
      expect.arrayContaining(['Certificate', 'Intermediate', 'Certificate_PKCS7', 'StartDate', 'EndDate', 'Serial']),
    );
    expect(signed.Certificate).toMatch(/^-----BEGIN CERTIFICATE-----\n[\s\S]+-----END CERTIFICATE-----\n$/);
    expect(signed.Certificate_PKCS7).toMatch(/^-----BEGIN PKCS7-----/);
    writeFileSync(join(dir, 'leaf.pem'), signed.Certificate);
    writeFileSync(join(dir, 'int.pem'), signed.Intermediate);
    const verify = (extra: string[]) =>
      spawnSync(
        'openssl',
        ['verify', '-partial_chain', '-CAfile', join(dir, 'int.pem'), ...extra, join(dir, 'leaf.pem')],
        { encoding: 'utf8' },
      );
    expect(verify([]).stdout).toContain(': OK');
    expect(
      execFileSync('openssl', ['x509', '-noout', '-serial', '-in', join(dir, 'leaf.pem')], { encoding: 'utf8' }).trim(),
    ).toBe(`serial=${signed.Serial}`);

    const revoked = JSON.parse(
      await cli(['ca', 'revoke', '--serial', signed.Serial, '--reason', 'keyCompromise', '--json']),
    );
    expect(revoked).toMatchObject({ Serial: signed.Serial, Reason: 'keyCompromise', AlreadyRevoked: false });
    writeFileSync(join(dir, 'crl.pem'), await cli(['ca', 'crl', '--issuer', 'trustpoint-rsa-int-1']));
    const v = verify(['-crl_check', '-CRLfile', join(dir, 'crl.pem')]);
    expect(`${v.stdout}${v.stderr}`).toContain('certificate revoked');
    await cli(['ca', 'crl', '--issuer', 'trustpoint-rsa-int-1', '--out', join(dir, 'crl.der')]);
    expect(
      execFileSync('openssl', ['crl', '-inform', 'DER', '-noout', '-text', '-in', join(dir, 'crl.der')], {
        encoding: 'utf8',
      }),
    ).toContain(`Serial Number: ${signed.Serial}`);
  }, 60_000);

  it('ok/ca distrust marks an issuer and ca list shows it', async () => {
    const out = JSON.parse(
      await cli([
        'ca',
        'distrust',
        '--issuer',
        'sectra-rsa-int-1',
        '--phase1',
        '2027-01-01',
        '--phase2',
        '2027-06-01',
        '--json',
      ]),
    );
    expect(out).toEqual({
      ID: 'sectra-rsa-int-1',
      Phase1: '2027-01-01T00:00:00Z',
      Phase2: '2027-06-01T00:00:00Z',
      Replacement: ['sectra-rsa-int-2'],
    });
    const list = JSON.parse(await cli(['ca', 'list', '--json'])) as {
      CACertificates: { ID: string; Distrust: unknown }[];
    };
    expect(list.CACertificates.find((c) => c.ID === 'sectra-rsa-int-1')?.Distrust).toEqual({
      Phase1: '2027-01-01T00:00:00Z',
      Phase2: '2027-06-01T00:00:00Z',
    });
  });

  it.each([
    [
      'a CSR that is not one',
      ['ca', 'sign', '--csr', '/etc/hostname', '--product', 'TrustPoint.DV'],
      /CSR could not be parsed/,
    ],
    ['an unknown product', ['ca', 'sign', '--csr', join(dir, 'r.csr'), '--product', 'Nope.DV'], /product/i],
    [
      'a chain the brand does not offer',
      [
        'ca',
        'sign',
        '--csr',
        join(dir, 'r.csr'),
        '--product',
        'TrustPoint.DV',
        '--signature-hash-algorithm',
        'SHA256-ECC-FULL',
      ],
      /not offered/,
    ],
    ['a bad serial', ['ca', 'revoke', '--serial', 'xyz'], /not a hex serial/],
    ['an unknown serial', ['ca', 'revoke', '--serial', '0123456789ABCDEF'], /no certificate with serial/],
    [
      'an unknown reason',
      ['ca', 'revoke', '--serial', '0123456789ABCDEF', '--reason', 'whim'],
      /revocation reason|no certificate/,
    ],
    ['an unknown issuer', ['ca', 'crl', '--issuer', 'nope'], /no issuing CA nope/],
    [
      'phase 2 before phase 1',
      ['ca', 'distrust', '--issuer', 'sectra-rsa-int-1', '--phase1', '2027-06-01', '--phase2', '2027-01-01'],
      /phase2 lies before/,
    ],
  ])(
    'fail/%s: one clear line, exit 1',
    async (_case, args, message) => {
      const r = await fails(args);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^certdesk: /);
      expect(r.stderr).toMatch(message);
    },
    30_000,
  );

  it('fail/a wrong key file stops any CA command with a clear message', async () => {
    const other = mkdtempSync(join(tmpdir(), 'cli-ca-kek-'));
    writeFileSync(join(other, 'k'), `${'ab'.repeat(32)}\n`, { mode: 0o600 });
    const r = await run(BIN, ['ca', 'list'], { env: { ...env(), CERTDESK_CA_KEY_FILE: join(other, 'k') } }).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/does not open CA key .* not the file the keys were sealed with/);
    expect(readFileSync(join(dir, 'ca-keys.secret'), 'utf8')).toMatch(/^[0-9a-f]{64}\n$/);
  });
});
