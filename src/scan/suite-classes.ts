// What a cipher suite is worth: the classes findings and the rating read, from the suite table.
import { CIPHER_SUITES, type CipherSuiteInfo } from './cipher-suites.js';
import type { AcceptedSuite, TlsVersion } from './types.js';

const BY_CODE = new Map(CIPHER_SUITES.map((s) => [s.code, s]));

/** The suites worth offering at a version: TLS 1.3's own five, or every other suite the version can carry. */
export function candidateSuites(version: TlsVersion): number[] {
  if (version === 'TLSv1.3') return CIPHER_SUITES.filter((s) => s.since === 'TLSv1.3').map((s) => s.code);
  const older = version === 'TLSv1.2' ? ['SSLv3', 'TLSv1', 'TLSv1.2'] : ['SSLv3', 'TLSv1'];
  return CIPHER_SUITES.filter((s) => older.includes(s.since)).map((s) => s.code);
}

/** Ephemeral (EC)DH key exchanges; TLS 1.3 suites (Kx=any) always are. Export DH is not counted: its 512-bit groups are broken. */
const EPHEMERAL_KX = new Set(['ECDH', 'DH', 'ECDHEPSK', 'DHEPSK', 'any']);
const BLOCK_CIPHERS = new Set(['AES', 'Camellia', 'ARIA', 'SEED', 'IDEA', 'DES', '3DES', 'RC2']);

/** The classes of a suite: `forward-secrecy`, `aead`, `cbc`, `3des`, `rc4`, `export`, `null`, `anonymous`. */
export function suiteClasses(s: CipherSuiteInfo): string[] {
  const classes: string[] = [];
  const exported = s.kx.includes('(512)') || s.name.startsWith('EXP');
  if (EPHEMERAL_KX.has(s.kx) && !exported) classes.push('forward-secrecy');
  if (s.mac === 'AEAD') classes.push('aead');
  if (BLOCK_CIPHERS.has(s.enc)) classes.push('cbc');
  if (s.enc === '3DES') classes.push('3des');
  if (s.enc === 'RC4') classes.push('rc4');
  if (exported) classes.push('export');
  if (s.enc === 'None') classes.push('null');
  if (s.auth === 'None') classes.push('anonymous');
  return classes;
}

/** The report's view of a suite the server chose; an unknown code gets its hex as name and no classes. */
export function acceptedSuite(code: number): AcceptedSuite {
  const s = BY_CODE.get(code);
  if (s === undefined) return { code, name: `0x${code.toString(16).padStart(4, '0')}`, bits: 0, classes: [] };
  return { code, name: s.name, bits: s.bits, classes: suiteClasses(s) };
}
