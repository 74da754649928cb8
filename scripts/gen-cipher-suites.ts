// Generates src/scan/cipher-suites.ts: the scanner's table of TLS cipher suites (IANA code →
// OpenSSL name, key exchange, authentication, cipher, bits, MAC). Most rows come from the local
// OpenSSL (`openssl ciphers -V 'ALL:COMPLEMENTOFALL:@SECLEVEL=0'`); the suites OpenSSL 3 no longer
// builds (RC4, 3DES, single DES, export, IDEA, SEED, static ECDH, two TLS 1.3 CCM suites) are
// listed by hand below, with the names OpenSSL 1.0.2 gave them (what sslscan and testssl print).
// Run: node --import tsx scripts/gen-cipher-suites.ts && npx prettier --write src/scan/cipher-suites.ts
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';

type Row = [
  code: number,
  name: string,
  since: string,
  kx: string,
  auth: string,
  enc: string,
  bits: number,
  mac: string,
];

/** Suites OpenSSL 3 does not list: code, name, first version, kx, auth, cipher, bits, MAC. */
const BY_HAND: readonly Row[] = [
  [0x0001, 'NULL-MD5', 'SSLv3', 'RSA', 'RSA', 'None', 0, 'MD5'],
  [0x0002, 'NULL-SHA', 'SSLv3', 'RSA', 'RSA', 'None', 0, 'SHA1'],
  [0x0003, 'EXP-RC4-MD5', 'SSLv3', 'RSA(512)', 'RSA', 'RC4', 40, 'MD5'],
  [0x0004, 'RC4-MD5', 'SSLv3', 'RSA', 'RSA', 'RC4', 128, 'MD5'],
  [0x0005, 'RC4-SHA', 'SSLv3', 'RSA', 'RSA', 'RC4', 128, 'SHA1'],
  [0x0006, 'EXP-RC2-CBC-MD5', 'SSLv3', 'RSA(512)', 'RSA', 'RC2', 40, 'MD5'],
  [0x0007, 'IDEA-CBC-SHA', 'SSLv3', 'RSA', 'RSA', 'IDEA', 128, 'SHA1'],
  [0x0008, 'EXP-DES-CBC-SHA', 'SSLv3', 'RSA(512)', 'RSA', 'DES', 40, 'SHA1'],
  [0x0009, 'DES-CBC-SHA', 'SSLv3', 'RSA', 'RSA', 'DES', 56, 'SHA1'],
  [0x000a, 'DES-CBC3-SHA', 'SSLv3', 'RSA', 'RSA', '3DES', 112, 'SHA1'],
  [0x0011, 'EXP-EDH-DSS-DES-CBC-SHA', 'SSLv3', 'DH(512)', 'DSS', 'DES', 40, 'SHA1'],
  [0x0012, 'EDH-DSS-DES-CBC-SHA', 'SSLv3', 'DH', 'DSS', 'DES', 56, 'SHA1'],
  [0x0013, 'EDH-DSS-DES-CBC3-SHA', 'SSLv3', 'DH', 'DSS', '3DES', 112, 'SHA1'],
  [0x0014, 'EXP-EDH-RSA-DES-CBC-SHA', 'SSLv3', 'DH(512)', 'RSA', 'DES', 40, 'SHA1'],
  [0x0015, 'EDH-RSA-DES-CBC-SHA', 'SSLv3', 'DH', 'RSA', 'DES', 56, 'SHA1'],
  [0x0016, 'EDH-RSA-DES-CBC3-SHA', 'SSLv3', 'DH', 'RSA', '3DES', 112, 'SHA1'],
  [0x0017, 'EXP-ADH-RC4-MD5', 'SSLv3', 'DH(512)', 'None', 'RC4', 40, 'MD5'],
  [0x0018, 'ADH-RC4-MD5', 'SSLv3', 'DH', 'None', 'RC4', 128, 'MD5'],
  [0x0019, 'EXP-ADH-DES-CBC-SHA', 'SSLv3', 'DH(512)', 'None', 'DES', 40, 'SHA1'],
  [0x001a, 'ADH-DES-CBC-SHA', 'SSLv3', 'DH', 'None', 'DES', 56, 'SHA1'],
  [0x001b, 'ADH-DES-CBC3-SHA', 'SSLv3', 'DH', 'None', '3DES', 112, 'SHA1'],
  [0x008a, 'PSK-RC4-SHA', 'SSLv3', 'PSK', 'PSK', 'RC4', 128, 'SHA1'],
  [0x008b, 'PSK-3DES-EDE-CBC-SHA', 'SSLv3', 'PSK', 'PSK', '3DES', 112, 'SHA1'],
  [0x0096, 'SEED-SHA', 'SSLv3', 'RSA', 'RSA', 'SEED', 128, 'SHA1'],
  [0x0099, 'DHE-DSS-SEED-SHA', 'SSLv3', 'DH', 'DSS', 'SEED', 128, 'SHA1'],
  [0x009a, 'DHE-RSA-SEED-SHA', 'SSLv3', 'DH', 'RSA', 'SEED', 128, 'SHA1'],
  [0x009b, 'ADH-SEED-SHA', 'SSLv3', 'DH', 'None', 'SEED', 128, 'SHA1'],
  [0xc001, 'ECDH-ECDSA-NULL-SHA', 'TLSv1', 'ECDH/ECDSA', 'ECDH', 'None', 0, 'SHA1'],
  [0xc002, 'ECDH-ECDSA-RC4-SHA', 'TLSv1', 'ECDH/ECDSA', 'ECDH', 'RC4', 128, 'SHA1'],
  [0xc003, 'ECDH-ECDSA-DES-CBC3-SHA', 'TLSv1', 'ECDH/ECDSA', 'ECDH', '3DES', 112, 'SHA1'],
  [0xc004, 'ECDH-ECDSA-AES128-SHA', 'TLSv1', 'ECDH/ECDSA', 'ECDH', 'AES', 128, 'SHA1'],
  [0xc005, 'ECDH-ECDSA-AES256-SHA', 'TLSv1', 'ECDH/ECDSA', 'ECDH', 'AES', 256, 'SHA1'],
  [0xc007, 'ECDHE-ECDSA-RC4-SHA', 'TLSv1', 'ECDH', 'ECDSA', 'RC4', 128, 'SHA1'],
  [0xc008, 'ECDHE-ECDSA-DES-CBC3-SHA', 'TLSv1', 'ECDH', 'ECDSA', '3DES', 112, 'SHA1'],
  [0xc00b, 'ECDH-RSA-NULL-SHA', 'TLSv1', 'ECDH/RSA', 'ECDH', 'None', 0, 'SHA1'],
  [0xc00c, 'ECDH-RSA-RC4-SHA', 'TLSv1', 'ECDH/RSA', 'ECDH', 'RC4', 128, 'SHA1'],
  [0xc00d, 'ECDH-RSA-DES-CBC3-SHA', 'TLSv1', 'ECDH/RSA', 'ECDH', '3DES', 112, 'SHA1'],
  [0xc00e, 'ECDH-RSA-AES128-SHA', 'TLSv1', 'ECDH/RSA', 'ECDH', 'AES', 128, 'SHA1'],
  [0xc00f, 'ECDH-RSA-AES256-SHA', 'TLSv1', 'ECDH/RSA', 'ECDH', 'AES', 256, 'SHA1'],
  [0xc011, 'ECDHE-RSA-RC4-SHA', 'TLSv1', 'ECDH', 'RSA', 'RC4', 128, 'SHA1'],
  [0xc012, 'ECDHE-RSA-DES-CBC3-SHA', 'TLSv1', 'ECDH', 'RSA', '3DES', 112, 'SHA1'],
  [0xc016, 'AECDH-RC4-SHA', 'TLSv1', 'ECDH', 'None', 'RC4', 128, 'SHA1'],
  [0xc017, 'AECDH-DES-CBC3-SHA', 'TLSv1', 'ECDH', 'None', '3DES', 112, 'SHA1'],
  [0xc01a, 'SRP-3DES-EDE-CBC-SHA', 'SSLv3', 'SRP', 'SRP', '3DES', 112, 'SHA1'],
  [0xc025, 'ECDH-ECDSA-AES128-SHA256', 'TLSv1.2', 'ECDH/ECDSA', 'ECDH', 'AES', 128, 'SHA256'],
  [0xc026, 'ECDH-ECDSA-AES256-SHA384', 'TLSv1.2', 'ECDH/ECDSA', 'ECDH', 'AES', 256, 'SHA384'],
  [0xc029, 'ECDH-RSA-AES128-SHA256', 'TLSv1.2', 'ECDH/RSA', 'ECDH', 'AES', 128, 'SHA256'],
  [0xc02a, 'ECDH-RSA-AES256-SHA384', 'TLSv1.2', 'ECDH/RSA', 'ECDH', 'AES', 256, 'SHA384'],
  [0xc02d, 'ECDH-ECDSA-AES128-GCM-SHA256', 'TLSv1.2', 'ECDH/ECDSA', 'ECDH', 'AESGCM', 128, 'AEAD'],
  [0xc02e, 'ECDH-ECDSA-AES256-GCM-SHA384', 'TLSv1.2', 'ECDH/ECDSA', 'ECDH', 'AESGCM', 256, 'AEAD'],
  [0xc031, 'ECDH-RSA-AES128-GCM-SHA256', 'TLSv1.2', 'ECDH/RSA', 'ECDH', 'AESGCM', 128, 'AEAD'],
  [0xc032, 'ECDH-RSA-AES256-GCM-SHA384', 'TLSv1.2', 'ECDH/RSA', 'ECDH', 'AESGCM', 256, 'AEAD'],
  [0x1304, 'TLS_AES_128_CCM_SHA256', 'TLSv1.3', 'any', 'any', 'AESCCM', 128, 'AEAD'],
  [0x1305, 'TLS_AES_128_CCM_8_SHA256', 'TLSv1.3', 'any', 'any', 'AESCCM8', 128, 'AEAD'],
];

/** One line of `openssl ciphers -V`: `0xC0,0x2F - NAME  TLSv1.2 Kx=ECDH Au=RSA Enc=AESGCM(128) Mac=AEAD`. */
function parseLine(line: string): Row | undefined {
  const m = /^\s*0x([0-9A-F]{2}),0x([0-9A-F]{2}) - (\S+)\s+(\S+)\s+Kx=(\S+)\s+Au=(\S+)\s+Enc=(\S+)\s+Mac=(\S+)/i.exec(
    line,
  );
  if (m === null) return undefined;
  const [, hi = '', lo = '', name = '', since = '', kx = '', auth = '', encText = '', mac = ''] = m;
  const enc = /^(.*?)(?:\((\d+)\))?$/.exec(encText)!;
  return [parseInt(hi + lo, 16), name, since, kx, auth, enc[1] ?? encText, Number(enc[2] ?? 0), mac];
}

const listed = execFileSync('openssl', ['ciphers', '-V', 'ALL:COMPLEMENTOFALL:@SECLEVEL=0'], { encoding: 'utf8' })
  .split('\n')
  .map(parseLine)
  .filter((r): r is Row => r !== undefined);
const byCode = new Map<number, Row>();
for (const row of [...BY_HAND, ...listed]) byCode.set(row[0], row);
const rows = [...byCode.values()].sort((a, b) => a[0] - b[0]);
const version = execFileSync('openssl', ['version'], { encoding: 'utf8' }).trim();

const hex = (n: number) => `0x${n.toString(16).padStart(4, '0')}`;
const text = `// Generated by scripts/gen-cipher-suites.ts from \`openssl ciphers -V 'ALL:COMPLEMENTOFALL:@SECLEVEL=0'\`
// (${version}) plus the suites OpenSSL 3 no longer lists, added by hand. Do not edit by hand.

/** One TLS cipher suite as OpenSSL describes it. */
export interface CipherSuiteInfo {
  /** IANA code point. */
  readonly code: number;
  /** OpenSSL's name (what sslscan prints). */
  readonly name: string;
  /** The first protocol version it can be used with (OpenSSL's column: SSLv3, TLSv1, TLSv1.2, TLSv1.3). */
  readonly since: string;
  /** Key exchange (OpenSSL's Kx: RSA, DH, ECDH, PSK, … and \`(512)\` for export). */
  readonly kx: string;
  /** Authentication (OpenSSL's Au: RSA, ECDSA, DSS, None, …). */
  readonly auth: string;
  /** Bulk cipher (OpenSSL's Enc without the bits: AESGCM, AES, 3DES, RC4, None, …). */
  readonly enc: string;
  /** Symmetric key bits (effective bits for export suites). */
  readonly bits: number;
  /** MAC (AEAD for AEAD ciphers). */
  readonly mac: string;
}

type Row = [code: number, name: string, since: string, kx: string, auth: string, enc: string, bits: number, mac: string];

const ROWS: readonly Row[] = [
${rows
  .map(
    (r) =>
      `  [${hex(r[0])}, ${r
        .slice(1)
        .map((v) => JSON.stringify(v).replaceAll('"', "'"))
        .join(', ')}],`,
  )
  .join('\n')}
];

/** Every suite the scanner knows, by IANA code, ascending. */
export const CIPHER_SUITES: readonly CipherSuiteInfo[] = ROWS.map(([code, name, since, kx, auth, enc, bits, mac]) => ({
  code,
  name,
  since,
  kx,
  auth,
  enc,
  bits,
  mac,
}));
`;
writeFileSync(new URL('../src/scan/cipher-suites.ts', import.meta.url), text);
console.log(`wrote src/scan/cipher-suites.ts: ${rows.length} suites`);
