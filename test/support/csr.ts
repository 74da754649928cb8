import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCsr {
  readonly pem: string;
  readonly commonName: string;
}

let cached: TestCsr | undefined;

/** An RSA-2048 CSR made by the openssl CLI (once per test file), CN and SAN www.certdesk-test.com. */
export function testCsr(): TestCsr {
  if (cached !== undefined) return cached;
  const dir = mkdtempSync(join(tmpdir(), 'csr-'));
  const commonName = 'www.certdesk-test.com';
  execFileSync(
    'openssl',
    [
      'req',
      '-new',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'csr.pem'),
      '-subj',
      `/C=DE/ST=Berlin/L=Berlin/O=Certdesk Test/CN=${commonName}`,
      '-addext',
      `subjectAltName=DNS:${commonName},DNS:certdesk-test.com`,
    ],
    { stdio: 'ignore' },
  );
  cached = { pem: readFileSync(join(dir, 'csr.pem'), 'utf8'), commonName };
  return cached;
}

/** A fresh ECDSA P-256 CSR made by the openssl CLI (a new key each call), CN and SAN as testCsr()'s. */
export function newEcCsr(): string {
  return csrFor('www.certdesk-test.com', ['www.certdesk-test.com', 'certdesk-test.com']);
}

/** A fresh ECDSA P-256 CSR made by the openssl CLI for `cn`, asking for `dnsNames`. */
export function csrFor(cn: string, dnsNames: readonly string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'csr-ec-'));
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
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'csr.pem'),
      '-subj',
      `/CN=${cn}`,
      '-addext',
      `subjectAltName=${dnsNames.map((n) => `DNS:${n}`).join(',')}`,
    ],
    { stdio: 'ignore' },
  );
  return readFileSync(join(dir, 'csr.pem'), 'utf8');
}
