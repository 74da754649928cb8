import { execFile, execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { beforeAll, describe, expect, it } from 'vitest';
import { caFixtureDataDir } from './support/ca-fixture.js';

const run = promisify(execFile);
const BIN = new URL('../bin/certdesk', import.meta.url).pathname;
// Holds the run's fixture CA keys: `ca init` makes the certificates, not the keys.
const dir = await caFixtureDataDir('cli-revoke-');
const env = (): NodeJS.ProcessEnv => ({
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CERTDESK_'))),
  CERTDESK_DATA_DIR: dir,
});
const cli = async (args: string[]) =>
  JSON.parse((await run(BIN, [...args, '--json'], { env: env() })).stdout) as Record<string, unknown>;
const fails = (args: string[]) =>
  run(BIN, args, { env: env() }).then(
    () => ({ code: 0, stderr: '' }),
    (e: { code: number; stderr: string }) => e,
  );

// Each test starts several certdesk processes one after another: bounded generously, as CI may run on a loaded machine.
describe('certdesk ca revoke of a revoked certificate', { timeout: 180_000 }, () => {
  let serial: string;

  beforeAll(async () => {
    await cli(['ca', 'init']);
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
    serial = (await cli(['ca', 'sign', '--csr', join(dir, 'r.csr'), '--product', 'TrustPoint.DV'])).Serial as string;
  }, 120_000);

  it('ok/superseded, then keyCompromise: the reason is raised, the date kept; any other repeat exits 1 with one clear line', async () => {
    const first = await cli(['ca', 'revoke', '--serial', serial, '--reason', 'superseded']);
    expect(first).toMatchObject({ Serial: serial, Reason: 'superseded', AlreadyRevoked: false });
    const same = await fails(['ca', 'revoke', '--serial', serial, '--reason', 'superseded']);
    expect(same.code).toBe(1);
    expect(same.stderr).toMatch(/^certdesk: .*already revoked \(superseded.*only a change to keyCompromise/);
    const raised = await cli(['ca', 'revoke', '--serial', serial, '--reason', 'keyCompromise']);
    expect(raised).toEqual({
      Serial: serial,
      RevokedAt: first.RevokedAt,
      Reason: 'keyCompromise',
      AlreadyRevoked: true,
      PreviousReason: 'superseded',
    });
    const again = await fails(['ca', 'revoke', '--serial', serial, '--reason', 'keyCompromise']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already revoked \(keyCompromise/);
    const crl = execFileSync(BIN, ['ca', 'crl', '--issuer', 'trustpoint-rsa-int-1'], { env: env(), encoding: 'utf8' });
    const text = execFileSync('openssl', ['crl', '-noout', '-text'], { input: crl, encoding: 'utf8' });
    expect(text).toMatch(
      new RegExp(
        `Serial Number: ${serial}\\s*\\n\\s*Revocation Date: [^\\n]*\\n\\s*CRL entry extensions:\\s*\\n\\s*X509v3 CRL Reason Code:\\s*\\n\\s*Key Compromise`,
      ),
    );
  }, 60_000);
  it('ok/the CRL cannot be re-signed: the revocation stands, exit 0 with a warning naming the failure and the remedy', async () => {
    const other = (await cli(['ca', 'sign', '--csr', join(dir, 'r.csr'), '--product', 'TrustPoint.DV']))
      .Serial as string;
    const db = new Database(join(dir, 'certdesk.db'));
    try {
      db.exec(
        "CREATE TRIGGER refuse_crl_update BEFORE UPDATE ON ca_crls BEGIN SELECT RAISE(ABORT, 'crl refused'); END",
      );
      db.exec(
        "CREATE TRIGGER refuse_crl_insert BEFORE INSERT ON ca_crls BEGIN SELECT RAISE(ABORT, 'crl refused'); END",
      );
      const res = await run(BIN, ['ca', 'revoke', '--serial', other, '--reason', 'keyCompromise', '--json'], {
        env: env(),
      });
      expect(JSON.parse(res.stdout)).toMatchObject({ Serial: other, Reason: 'keyCompromise', AlreadyRevoked: false });
      expect(res.stderr).toMatch(
        /^certdesk: warning: revoked, but the CRL could not be re-signed \(.*crl refused.*\).*ca crl --issuer/,
      );
    } finally {
      db.exec('DROP TRIGGER IF EXISTS refuse_crl_update');
      db.exec('DROP TRIGGER IF EXISTS refuse_crl_insert');
      db.close();
    }
    const check = new Database(join(dir, 'certdesk.db'), { readonly: true });
    try {
      expect(check.prepare('SELECT revocation_reason FROM certificates WHERE serial = ?').get(other)).toEqual({
        revocation_reason: 1,
      });
    } finally {
      check.close();
    }
  }, 60_000);
});
