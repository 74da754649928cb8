import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OpensslCa, type CaCert } from '../../test/support/openssl-ca.js';
import { TAG, children, contents, expectTag, oidText, readTlv } from '../core/der.js';
import { buildCrl, type CrlEntry } from './crl.js';
import { pem } from './der-writer.js';

// Fixtures: an ECDSA P-256 root and an RSA-2048 intermediate it issued, made with the openssl CLI.
const fx = new OpensslCa('crl-test-');
const { openssl, run } = fx;

let root: CaCert;
let inter: CaCert;
const now = Math.floor(Date.now() / 1000);

beforeAll(() => {
  fx.setUp({ intermediateSubject: '/C=US/O=Certdesk Test/OU=Issuing/CN=Test Intermediate RSA' });
  fx.issue('int-revoked', 'int', '0x1001');
  fx.issue('int-good', 'int', '0x1002');
  fx.issue('int-highbit', 'int', '0x00c0ffee00000000000000000000000001');
  fx.issue('root-revoked', 'root', '0x2001');
  fx.issue('root-good', 'root', '0x2002');
  root = fx.cert('root.pem', 'root.key', false);
  inter = fx.cert('int.pem', 'int.key', true);
}, 60_000);

afterAll(() => fx.cleanUp());

const hex = (h: string) => Uint8Array.from(Buffer.from(h, 'hex'));
const toHex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** Writes the CRL as DER and PEM; returns the DER file name. */
function writeCrl(name: string, der: Uint8Array): string {
  writeFileSync(fx.path(`${name}.crl`), der);
  writeFileSync(fx.path(`${name}.crl.pem`), pem('X509 CRL', der));
  return `${name}.crl`;
}

describe('buildCrl', () => {
  const cases = [
    {
      label: 'RSA intermediate',
      ca: () => inter,
      prefix: 'int',
      chain: ['-CAfile', 'root.pem', '-untrusted', 'int.pem'],
    },
    { label: 'ECDSA root', ca: () => root, prefix: 'root', chain: ['-CAfile', 'root.pem'] },
  ];

  for (const { label, ca, prefix, chain } of cases) {
    it(`makes a CRL that openssl verifies and applies (${label})`, () => {
      const c = ca();
      const base = prefix === 'int' ? 0x1000 : 0x2000;
      const entries: CrlEntry[] = [
        { serial: hex((base + 1).toString(16)), revokedAt: now - 3600, reason: 1 },
        { serial: hex('00c0ffee00000000000000000000000001'), revokedAt: now - 7200, reason: null },
        { serial: hex('0077'), revokedAt: now - 60, reason: 4 },
        { serial: hex('0abc'), revokedAt: now - 60, reason: 0 },
      ];
      const der = buildCrl(
        { issuer: c.name, authorityKeyId: c.ski, number: 42, thisUpdate: now - 60, nextUpdate: now + 86_400, entries },
        c.signer,
      );
      const file = writeCrl(`${prefix}`, der);

      const verify = run('crl', '-inform', 'DER', '-in', file, '-CAfile', c.file, '-noout');
      expect(verify.out).toContain('verify OK');
      expect(verify.status).toBe(0);

      const text = openssl('crl', '-inform', 'DER', '-in', file, '-noout', '-text');
      expect(text).toContain('Version 2 (0x1)');
      expect(text).toMatch(/X509v3 CRL Number:\s*\n\s*42\n/);
      const skiHex = Buffer.from(c.ski).toString('hex').toUpperCase().match(/../g)!.join(':');
      expect(text).toMatch(new RegExp(`X509v3 Authority Key Identifier:\\s*\\n\\s*(keyid:)?${skiHex}`));
      expect(text).toMatch(
        new RegExp(
          `Serial Number: ${(base + 1).toString(16).toUpperCase()}\\s*\\n\\s*Revocation Date: .*\\n\\s*CRL entry extensions:\\s*\\n\\s*X509v3 CRL Reason Code:\\s*\\n\\s*Key Compromise`,
        ),
      );
      expect(text).toMatch(
        /Serial Number: C0FFEE00000000000000000000000001\s*\n\s*Revocation Date: .*\n\s*Serial Number: 77/,
      );
      expect(text).toMatch(
        /Serial Number: 77\s*\n\s*Revocation Date: .*\n\s*CRL entry extensions:\s*\n\s*X509v3 CRL Reason Code:\s*\n\s*Superseded/,
      );
      expect(text).toMatch(/Serial Number: 0ABC\s*\n\s*Revocation Date: [^\n]*\n?\s*Signature Algorithm/);

      const revoked = run('verify', '-crl_check', ...chain, '-CRLfile', `${prefix}.crl.pem`, `${prefix}-revoked.pem`);
      expect(revoked.out).toContain('certificate revoked');
      expect(revoked.status).not.toBe(0);
      const good = run('verify', '-crl_check', ...chain, '-CRLfile', `${prefix}.crl.pem`, `${prefix}-good.pem`);
      expect(good.out).toContain(`${prefix}-good.pem: OK`);
      expect(good.status).toBe(0);
      if (prefix === 'int') {
        // The high-bit serial needs its sign byte to match the certificate's serial.
        const high = run('verify', '-crl_check', ...chain, '-CRLfile', 'int.crl.pem', 'int-highbit.pem');
        expect(high.out).toContain('certificate revoked');
      }
    });
  }

  it('omits revokedCertificates when empty, and openssl accepts it', () => {
    const der = buildCrl(
      {
        issuer: inter.name,
        authorityKeyId: inter.ski,
        number: 1n,
        thisUpdate: now - 60,
        nextUpdate: now + 3600,
        entries: [],
      },
      inter.signer,
    );
    const tbs = children(der, children(der, readTlv(der, 0))[0]!);
    // version, signature, issuer, thisUpdate, nextUpdate, [0] extensions.
    expect(tbs.map((t) => t.tag)).toEqual([0x02, 0x30, 0x30, 0x17, 0x17, 0xa0]);
    writeCrl('empty', der);
    expect(run('crl', '-inform', 'DER', '-in', 'empty.crl', '-CAfile', 'int.pem', '-noout').out).toContain('verify OK');
    expect(openssl('crl', '-inform', 'DER', '-in', 'empty.crl', '-noout', '-text')).toContain(
      'No Revoked Certificates',
    );
    const good = run(
      'verify',
      '-crl_check',
      '-CAfile',
      'root.pem',
      '-untrusted',
      'int.pem',
      '-CRLfile',
      'empty.crl.pem',
      'int-revoked.pem',
    );
    expect(good.out).toContain('int-revoked.pem: OK');
  });

  it('encodes the structure of RFC 5280 §5.1 exactly', () => {
    const der = buildCrl(
      {
        issuer: root.name,
        authorityKeyId: root.ski,
        number: 2n ** 100n,
        thisUpdate: now,
        nextUpdate: now + 10,
        entries: [{ serial: hex('000080'), revokedAt: 2_600_000_000, reason: 9 }],
      },
      root.signer,
    );
    const top = readTlv(der, 0);
    expect(top.end).toBe(der.length);
    const [tbsT, alg, sig] = children(der, top);
    expect(toHex(der.subarray(alg!.start, alg!.end))).toBe(toHex(root.signer.algorithm));
    expect(sig!.tag).toBe(TAG.BIT_STRING);
    const tbs = children(der, tbsT!);
    expect(toHex(contents(der, tbs[0]!))).toBe('01');
    expect(toHex(der.subarray(tbs[2]!.start, tbs[2]!.end))).toBe(toHex(root.name));
    const [entry] = children(der, tbs[5]!);
    const [serial, when, exts] = children(der, entry!);
    expect(toHex(der.subarray(serial!.start, serial!.end))).toBe('02020080');
    expect(when!.tag).toBe(0x18); // 2052: GeneralizedTime
    const reasonExt = children(der, children(der, exts!)[0]!);
    expect(oidText(der, reasonExt[0]!)).toBe('2.5.29.21');
    expect(toHex(contents(der, reasonExt[1]!))).toBe('0a0109');
    const crlExts = children(der, children(der, tbs[6]!)[0]!).map((e) => children(der, e));
    expect(crlExts.map((e) => oidText(der, e[0]!))).toEqual(['2.5.29.35', '2.5.29.20']);
    expect(crlExts.every((e) => e.length === 2)).toBe(true); // non-critical: BOOLEAN omitted
    const aki = contents(der, crlExts[0]![1]!);
    expect(toHex(aki)).toBe(toHex(Uint8Array.of(0x30, root.ski.length + 2, 0x80, root.ski.length, ...root.ski)));
    const number = contents(der, expectTag(crlExts[1]![1], TAG.OCTET_STRING));
    expect(toHex(number)).toBe(`020d10${'00'.repeat(12)}`);
  });

  it('rejects reason 7 and 8, and other invalid input', () => {
    const input = (reason: number | null) => ({
      issuer: root.name,
      authorityKeyId: root.ski,
      number: 1,
      thisUpdate: now,
      nextUpdate: now + 10,
      entries: [{ serial: hex('01'), revokedAt: now, reason }],
    });
    for (const ok of [null, 0, 1, 2, 3, 4, 5, 6, 9, 10]) expect(() => buildCrl(input(ok), root.signer)).not.toThrow();
    for (const bad of [7, 8, 11, -1, 1.5]) expect(() => buildCrl(input(bad), root.signer)).toThrow(RangeError);
    expect(() => buildCrl({ ...input(null), number: 2n ** 160n }, root.signer)).toThrow(RangeError);
    expect(() => buildCrl({ ...input(null), nextUpdate: now - 1 }, root.signer)).toThrow(RangeError);
    expect(() => buildCrl({ ...input(null), issuer: root.name.subarray(1) }, root.signer)).toThrow();
  });

  it('builds a 100,000-entry CRL quickly, and openssl parses and verifies it', () => {
    const reasons = [null, 1, 4, 5, 0, 3, 9];
    const entries: CrlEntry[] = [];
    for (let i = 0; i < 100_000; i++) {
      entries.push({ serial: randomBytes(16), revokedAt: now - i, reason: reasons[i % reasons.length]! });
    }
    const started = performance.now();
    const der = buildCrl(
      {
        issuer: inter.name,
        authorityKeyId: inter.ski,
        number: 7,
        thisUpdate: now - 60,
        nextUpdate: now + 3600,
        entries,
      },
      inter.signer,
    );
    const ms = performance.now() - started;
    console.log(`100,000-entry CRL: ${ms.toFixed(0)} ms, ${(der.length / 1e6).toFixed(2)} MB`);
    expect(ms).toBeLessThan(5000);
    writeCrl('big', der);
    const verify = run('crl', '-inform', 'DER', '-in', 'big.crl', '-CAfile', 'int.pem', '-noout');
    expect(verify.out).toContain('verify OK');
    const tbs = children(der, children(der, readTlv(der, 0))[0]!);
    expect(children(der, tbs[5]!).length).toBe(100_000);
  });
});
