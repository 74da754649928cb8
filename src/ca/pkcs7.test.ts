import { X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OpensslCa } from '../../test/support/openssl-ca.js';
import { pem } from './der-writer.js';
import { certsOnlyPkcs7 } from './pkcs7.js';

const fx = new OpensslCa('p7-test-');
const { openssl, certDer: der } = fx;
const SUBJECTS = {
  'root.pem': 'subject=C = US, O = Certdesk Test, CN = Test Root EC',
  'int.pem': 'subject=C = US, O = Certdesk Test, CN = Test Intermediate RSA',
  'leaf.pem': 'subject=CN = leaf.example',
} as const;
type CertFile = keyof typeof SUBJECTS;

beforeAll(() => {
  fx.setUp();
  fx.issue('leaf', 'int', '0x1001');
}, 60_000);

afterAll(() => fx.cleanUp());

describe('certsOnlyPkcs7', () => {
  const orders: CertFile[][] = [['leaf.pem'], ['leaf.pem', 'int.pem', 'root.pem'], ['root.pem', 'leaf.pem', 'int.pem']];
  for (const files of orders) {
    it(`lists ${files.join(', ')} in that order with openssl pkcs7`, () => {
      const p7 = certsOnlyPkcs7(files.map(der));
      writeFileSync(fx.path('x.p7b'), pem('PKCS7', p7));
      const out = openssl('pkcs7', '-print_certs', '-noout', '-in', 'x.p7b');
      const subjects = out.split('\n').filter((l) => l.startsWith('subject='));
      expect(subjects).toEqual(files.map((f) => SUBJECTS[f]));
      // The certificates come back byte for byte.
      const printed = openssl('pkcs7', '-print_certs', '-in', 'x.p7b');
      const blocks = printed.match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g)!;
      expect(blocks.map((b) => new X509Certificate(b).raw.toString('hex'))).toEqual(
        files.map((f) => Buffer.from(der(f)).toString('hex')),
      );
    });
  }

  it('is byte-identical to openssl crl2pkcs7 -nocrl', () => {
    writeFileSync(
      fx.path('chain.pem'),
      ['leaf.pem', 'int.pem', 'root.pem'].map((f) => readFileSync(fx.path(f), 'utf8')).join(''),
    );
    openssl('crl2pkcs7', '-nocrl', '-certfile', 'chain.pem', '-outform', 'DER', '-out', 'ref.p7b');
    const ref = readFileSync(fx.path('ref.p7b')).toString('hex');
    expect(Buffer.from(certsOnlyPkcs7(['leaf.pem', 'int.pem', 'root.pem'].map(der))).toString('hex')).toBe(ref);
  });

  it('omits the certificates field when there are none', () => {
    const p7 = certsOnlyPkcs7([]);
    expect(Buffer.from(p7).toString('hex')).toBe(
      '3023' + '06092a864886f70d010702' + 'a016' + '3014' + '020101' + '3100' + '300b06092a864886f70d010701' + '3100',
    );
    writeFileSync(fx.path('empty.p7b'), pem('PKCS7', p7));
    expect(openssl('pkcs7', '-in', 'empty.p7b', '-print')).toContain('pkcs7-signedData');
  });
});
