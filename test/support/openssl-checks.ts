// Checks of what the CA produced, made by the openssl CLI as a relying party would.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BuiltinCa } from '../../src/ca/index.js';

// Tests run the CA on a fixed clock (TEST_NOW, 2026-11-21), and openssl checks times against the
// machine's: a CRL or OCSP answer signed then expires a week later by the machine's time. The
// checks are made as of the test's clock instead.

/** `openssl verify`'s options to check validity as of `seconds` (the test's clock) instead of now. */
export const verifyAsOf = (seconds: number): string[] => ['-attime', String(seconds)];

/**
 * `openssl ocsp`'s options to accept an answer's own times as of `seconds`: `-attime` does not
 * reach them, so the tolerance (openssl's default 5 minutes) grows by the distance to it.
 */
export const ocspAsOf = (seconds: number): string[] => [
  '-validity_period',
  String(Math.abs(Math.floor(Date.now() / 1000) - seconds) + 300),
];

/** One directory per test file: openssl names its files in its output, which tests compare. */
const dir = mkdtempSync(join(tmpdir(), 'ocsp-'));

/**
 * `openssl ocsp` over the responder's answer (as the CA gives it) for a certificate of the
 * TrustPoint RSA chain: its output, e.g. "Response verify OK" and "…: revoked".
 */
export async function ocspStatus(
  ca: Pick<BuiltinCa, 'chain' | 'ocsp'>,
  o: { certificate: string; intermediate: string },
  asOf: number,
): Promise<string> {
  writeFileSync(join(dir, 'o-leaf.pem'), o.certificate);
  writeFileSync(join(dir, 'o-int.pem'), o.intermediate);
  writeFileSync(join(dir, 'o-root.pem'), ca.chain('TrustPoint', 'SHA256-FULL-CHAIN').root);
  spawnSync('openssl', [
    'ocsp',
    '-issuer',
    join(dir, 'o-int.pem'),
    '-cert',
    join(dir, 'o-leaf.pem'),
    '-reqout',
    join(dir, 'o.req'),
    '-no_nonce',
  ]);
  writeFileSync(join(dir, 'o.resp'), await ca.ocsp(readFileSync(join(dir, 'o.req'))));
  const r = spawnSync(
    'openssl',
    [
      'ocsp',
      '-respin',
      join(dir, 'o.resp'),
      '-issuer',
      join(dir, 'o-int.pem'),
      '-CAfile',
      join(dir, 'o-root.pem'),
      '-cert',
      join(dir, 'o-leaf.pem'),
      '-no_nonce',
      ...ocspAsOf(asOf),
    ],
    { encoding: 'utf8' },
  );
  return `${r.stdout}${r.stderr}`;
}

/** `openssl verify` of a delivered certificate and intermediate against the TrustPoint RSA root: its output ("…: OK"). */
export function verifyDelivered(
  ca: Pick<BuiltinCa, 'chain'>,
  o: { certificate: string; intermediate: string },
  asOf: number,
): string {
  return verifyChain(o, ca.chain('TrustPoint', 'SHA256-FULL-CHAIN').root, asOf);
}

/** `openssl verify` of a certificate and its intermediate against `root`, as of `asOf`: its output ("…: OK"). */
export function verifyChain(o: { certificate: string; intermediate: string }, root: string, asOf: number): string {
  writeFileSync(join(dir, 'v-leaf.pem'), o.certificate);
  writeFileSync(join(dir, 'v-int.pem'), o.intermediate);
  writeFileSync(join(dir, 'v-root.pem'), root);
  const r = spawnSync(
    'openssl',
    [
      'verify',
      ...verifyAsOf(asOf),
      '-CAfile',
      join(dir, 'v-root.pem'),
      '-untrusted',
      join(dir, 'v-int.pem'),
      join(dir, 'v-leaf.pem'),
    ],
    { encoding: 'utf8' },
  );
  return `${r.stdout}${r.stderr}`;
}
