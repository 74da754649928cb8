import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pem } from './der-writer.js';
import { certsOnlyPkcs7 } from './pkcs7.js';

const CNF = `[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[leaf]
basicConstraints = CA:FALSE
subjectKeyIdentifier = hash
`;

let dir = '';
const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const der = (file: string) => new Uint8Array(new X509Certificate(readFileSync(join(dir, file))).raw);
const SUBJECTS = {
  'root.pem': 'subject=C = US, O = Certdesk Test, CN = Test Root EC',
  'int.pem': 'subject=C = US, O = Certdesk Test, CN = Test Intermediate RSA',
  'leaf.pem': 'subject=CN = leaf.example',
} as const;
type CertFile = keyof typeof SUBJECTS;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'p7-test-'));
  writeFileSync(join(dir, 'ca.cnf'), CNF);
  openssl('req', '-x509', '-config', 'ca.cnf', '-extensions', 'v3_ca', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
    '-nodes', '-keyout', 'root.key', '-out', 'root.pem', '-subj', '/C=US/O=Certdesk Test/CN=Test Root EC', '-days', '30');
  openssl('req', '-new', '-config', 'ca.cnf', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'int.key', '-out', 'int.csr',
    '-subj', '/C=US/O=Certdesk Test/CN=Test Intermediate RSA');
  openssl('x509', '-req', '-in', 'int.csr', '-CA', 'root.pem', '-CAkey', 'root.key', '-set_serial', '0x1000', '-days', '30',
    '-extfile', 'ca.cnf', '-extensions', 'v3_ca', '-out', 'int.pem');
  openssl('req', '-new', '-config', 'ca.cnf', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', 'leaf.key', '-out', 'leaf.csr', '-subj', '/CN=leaf.example');
  openssl('x509', '-req', '-in', 'leaf.csr', '-CA', 'int.pem', '-CAkey', 'int.key', '-set_serial', '0x1001', '-days', '10',
    '-extfile', 'ca.cnf', '-extensions', 'leaf', '-out', 'leaf.pem');
}, 60_000);

afterAll(() => {
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

describe('certsOnlyPkcs7', () => {
  const orders: CertFile[][] = [['leaf.pem'], ['leaf.pem', 'int.pem', 'root.pem'], ['root.pem', 'leaf.pem', 'int.pem']];
  for (const files of orders) {
    it(`lists ${files.join(', ')} in that order with openssl pkcs7`, () => {
      const p7 = certsOnlyPkcs7(files.map(der));
      writeFileSync(join(dir, 'x.p7b'), pem('PKCS7', p7));
      const out = openssl('pkcs7', '-print_certs', '-noout', '-in', 'x.p7b');
      const subjects = out.split('\n').filter((l) => l.startsWith('subject='));
      expect(subjects).toEqual(files.map((f) => SUBJECTS[f]));
      // The certificates come back byte for byte.
      const printed = openssl('pkcs7', '-print_certs', '-in', 'x.p7b');
      const blocks = printed.match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g)!;
      expect(blocks.map((b) => new X509Certificate(b).raw.toString('hex'))).toEqual(files.map((f) => Buffer.from(der(f)).toString('hex')));
    });
  }

  it('is byte-identical to openssl crl2pkcs7 -nocrl', () => {
    writeFileSync(join(dir, 'chain.pem'), ['leaf.pem', 'int.pem', 'root.pem'].map((f) => readFileSync(join(dir, f), 'utf8')).join(''));
    openssl('crl2pkcs7', '-nocrl', '-certfile', 'chain.pem', '-outform', 'DER', '-out', 'ref.p7b');
    const ref = readFileSync(join(dir, 'ref.p7b')).toString('hex');
    expect(Buffer.from(certsOnlyPkcs7(['leaf.pem', 'int.pem', 'root.pem'].map(der))).toString('hex')).toBe(ref);
  });

  it('omits the certificates field when there are none', () => {
    const p7 = certsOnlyPkcs7([]);
    expect(Buffer.from(p7).toString('hex')).toBe('3023' + '06092a864886f70d010702' + 'a016' + '3014' + '020101' + '3100' + '300b06092a864886f70d010701' + '3100');
    writeFileSync(join(dir, 'empty.p7b'), pem('PKCS7', p7));
    expect(openssl('pkcs7', '-in', 'empty.p7b', '-print')).toContain('pkcs7-signedData');
  });
});
