// The rating, after the structure of Qualys' SSL Server Rating Guide: three scores weighted
// 30/30/40, a letter from thresholds, then caps for what a number cannot express, F for a
// certificate a browser refuses, and A+ for an exemplary A. docs/scan-criteria.md states the rules.
import { HSTS_MIN_SECONDS, type ScanFacts } from './findings.js';
import { GRADES, type Finding, type Grade, type Rating, type TlsVersion } from './types.js';

const PROTOCOL_SCORE: Readonly<Record<TlsVersion, number>> = {
  SSLv3: 80,
  'TLSv1.0': 90,
  'TLSv1.1': 95,
  'TLSv1.2': 100,
  'TLSv1.3': 100,
};

/** Score thresholds of the letters A to E; below the last, F. */
const THRESHOLDS: ReadonlyArray<readonly [number, Grade]> = [
  [80, 'A'],
  [65, 'B'],
  [50, 'C'],
  [35, 'D'],
  [20, 'E'],
];

/** The rating of a scan with its findings (findingsOf). Pure. */
export function rate(s: ScanFacts, findings: readonly Finding[]): Rating {
  const offered = s.protocols.filter((p) => p.offered === true);
  const suites = offered.flatMap((p) => p.suites);
  const protocolScores = offered.map((p) => PROTOCOL_SCORE[p.version]);
  const protocolScore =
    protocolScores.length === 0 ? 0 : (Math.max(...protocolScores) + Math.min(...protocolScores)) / 2;
  const keyExchangeScore = keyScore(
    s,
    suites.map((x) => x.classes),
  );
  const bitScores = suites.map((x) => bitsScore(x.bits));
  const cipherScore = bitScores.length === 0 ? 0 : (Math.max(...bitScores) + Math.min(...bitScores)) / 2;
  // A zero in any category makes the whole score zero (the guide's rule).
  const score =
    protocolScore === 0 || keyExchangeScore === 0 || cipherScore === 0
      ? 0
      : Math.round(0.3 * protocolScore + 0.3 * keyExchangeScore + 0.4 * cipherScore);
  let grade: Grade = THRESHOLDS.find(([min]) => score >= min)?.[1] ?? 'F';
  const caps: string[] = [];
  for (const [id, cap, why] of CAPS) {
    if (!findings.some((x) => x.id === id)) continue;
    caps.push(`${why}: at most ${cap}`);
    if (GRADES.indexOf(cap) > GRADES.indexOf(grade)) grade = cap;
  }
  const poodle = offered.some((p) => p.version === 'SSLv3' && p.suites.some((x) => x.classes.includes('cbc')));
  if (poodle) {
    caps.push('SSL 3.0 with CBC suites (POODLE): F');
    grade = 'F';
  }
  const exemplary =
    grade === 'A' &&
    caps.length === 0 &&
    !findings.some((x) => x.severity === 'critical' || x.severity === 'high' || x.severity === 'medium') &&
    s.http.hsts !== null &&
    s.http.hsts.maxAge >= HSTS_MIN_SECONDS;
  return {
    grade: exemplary ? 'A+' : grade,
    protocolScore,
    keyExchangeScore,
    cipherScore,
    score,
    caps,
  };
}

/** Finding id → the best grade a server with it can get, and why. */
const CAPS: ReadonlyArray<readonly [string, Grade, string]> = [
  ['cert.none', 'F', 'no certificate'],
  ['cert.expired', 'F', 'expired certificate'],
  ['cert.not-yet-valid', 'F', 'certificate not valid yet'],
  ['cert.name-mismatch', 'F', 'certificate for another name'],
  ['cert.untrusted', 'F', 'untrusted certificate'],
  ['cert.weak-signature', 'F', 'certificate signed with MD5 or SHA-1'],
  ['cipher.export', 'F', 'export suites'],
  ['cipher.null', 'F', 'suites without encryption'],
  ['cipher.anonymous', 'F', 'anonymous suites'],
  ['protocol.ssl3', 'C', 'SSL 3.0 offered'],
  ['cipher.rc4', 'C', 'RC4 accepted'],
  ['cipher.3des', 'C', '3DES accepted'],
  ['handshake.compression', 'C', 'TLS compression'],
  ['handshake.insecure-renegotiation', 'C', 'no secure renegotiation'],
  ['protocol.no-tls12', 'C', 'no TLS 1.2 or 1.3'],
  ['protocol.tls10', 'B', 'TLS 1.0 offered'],
  ['protocol.tls11', 'B', 'TLS 1.1 offered'],
  ['cipher.no-forward-secrecy', 'B', 'no forward secrecy'],
  ['cipher.cbc-only', 'B', 'no AEAD suite'],
  ['cert.weak-key', 'B', 'RSA key under 2048 bits'],
  ['cert.chain-incomplete', 'B', 'incomplete chain'],
  ['handshake.no-fallback-scsv', 'A-', 'no TLS_FALLBACK_SCSV'],
];

/**
 * Key exchange: the certificate key's strength in RSA-equivalent bits (an EC key of n bits is worth
 * about RSA 12n: 256 → 3072), 0 with anonymous suites, at most 40 with export suites.
 */
function keyScore(s: ScanFacts, classes: ReadonlyArray<readonly string[]>): number {
  if (s.certificate === null || classes.some((c) => c.includes('anonymous'))) return 0;
  const { keyType, keyBits } = s.certificate;
  const bits = keyType === 'EC' ? keyBits * 12 : keyType === 'RSA' ? keyBits : keyBits >= 256 ? 3072 : 0;
  const score = bits < 512 ? 20 : bits < 1024 ? 40 : bits < 2048 ? 80 : bits < 4096 ? 90 : 100;
  return classes.some((c) => c.includes('export')) ? Math.min(score, 40) : score;
}

/** Cipher strength of one suite by its symmetric key bits. */
function bitsScore(bits: number): number {
  return bits === 0 ? 0 : bits < 128 ? 20 : bits < 256 ? 80 : 100;
}
