// Checks of what the CA produced, made by the openssl CLI as a relying party would.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BuiltinCa } from '../../src/ca/index.js';

/** One directory per test file: openssl names its files in its output, which tests compare. */
const dir = mkdtempSync(join(tmpdir(), 'ocsp-'));

/**
 * `openssl ocsp` over the responder's answer (as the CA gives it) for a certificate of the
 * TrustPoint RSA chain: its output, e.g. "Response verify OK" and "…: revoked".
 */
export async function ocspStatus(
  ca: Pick<BuiltinCa, 'chain' | 'ocsp'>,
  o: { certificate: string; intermediate: string },
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
    ],
    { encoding: 'utf8' },
  );
  return `${r.stdout}${r.stderr}`;
}

/** `openssl verify` of a delivered certificate and intermediate against the TrustPoint RSA root: its output ("…: OK"). */
export function verifyDelivered(
  ca: Pick<BuiltinCa, 'chain'>,
  o: { certificate: string; intermediate: string },
): string {
  writeFileSync(join(dir, 'v-leaf.pem'), o.certificate);
  writeFileSync(join(dir, 'v-int.pem'), o.intermediate);
  writeFileSync(join(dir, 'v-root.pem'), ca.chain('TrustPoint', 'SHA256-FULL-CHAIN').root);
  const r = spawnSync(
    'openssl',
    ['verify', '-CAfile', join(dir, 'v-root.pem'), '-untrusted', join(dir, 'v-int.pem'), join(dir, 'v-leaf.pem')],
    { encoding: 'utf8' },
  );
  return `${r.stdout}${r.stderr}`;
}
