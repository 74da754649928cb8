import { describe, expect, it } from 'vitest';
import { CIPHER_SUITES } from './cipher-suites.js';
import { findingsOf, type ScanFacts } from './findings.js';
import { rate } from './rating.js';
import { acceptedSuite, candidateSuites } from './suite-classes.js';
import type { CertificateResult, ProtocolResult, TlsVersion } from './types.js';

// The rules of docs/scan-criteria.md on made-up scans, for what no server on these machines can
// serve (Debian 12's OpenSSL 3 builds no SSLv3, RC4, 3DES or export suites).
const NOW = 1795219200;
const CERT: CertificateResult = {
  chainPem: [],
  subject: 'CN=www.example.com',
  issuer: 'CN=Issuing CA',
  notBefore: NOW - 86_400,
  notAfter: NOW + 90 * 86_400,
  expired: false,
  matchesName: true,
  trusted: true,
  chainComplete: true,
  chainInOrder: true,
  keyType: 'RSA',
  keyBits: 2048,
  signatureAlgorithm: 'sha256WithRSAEncryption',
  isOrderCertificate: true,
  ocspStapled: true,
};
const code = (name: string) => CIPHER_SUITES.find((s) => s.name === name)!.code;
const proto = (version: TlsVersion, names: string[]): ProtocolResult => ({
  version,
  offered: true,
  suites: names.map((n) => acceptedSuite(code(n))),
  serverPreference: true,
});
const MODERN = ['ECDHE-RSA-AES256-GCM-SHA384', 'ECDHE-RSA-AES128-GCM-SHA256'];

function facts(over: Partial<ScanFacts> = {}): ScanFacts {
  return {
    protocols: [proto('TLSv1.2', MODERN), proto('TLSv1.3', ['TLS_AES_128_GCM_SHA256'])],
    certificate: CERT,
    handshake: { secureRenegotiation: true, compression: false, fallbackScsv: true },
    http: { redirectsToHttps: true, hsts: { maxAge: 31536000, includeSubDomains: true, preload: false }, headers: {} },
    now: NOW,
    ...over,
  };
}
const rated = (f: ScanFacts) => ({ rating: rate(f, findingsOf(f)), ids: findingsOf(f).map((x) => x.id) });

describe('rate', () => {
  it('ok/modern TLS with a year of HSTS is A+ (scores 100/90/90 → 93)', () => {
    const { rating } = rated(facts());
    expect(rating).toMatchObject({ grade: 'A+', protocolScore: 100, keyExchangeScore: 90, cipherScore: 90, score: 93 });
  });

  it('ok/HSTS under 180 days keeps it at A', () => {
    const f = facts({
      http: { redirectsToHttps: true, hsts: { maxAge: 86_400, includeSubDomains: false, preload: false }, headers: {} },
    });
    expect(rated(f).rating.grade).toBe('A');
  });

  it('fail/no TLS_FALLBACK_SCSV caps at A-', () => {
    const f = facts({ handshake: { secureRenegotiation: true, compression: false, fallbackScsv: false } });
    expect(rated(f).rating.grade).toBe('A-');
  });

  it.each([
    ['3DES', 'DES-CBC3-SHA', 'cipher.3des', 'C'],
    ['RC4', 'RC4-SHA', 'cipher.rc4', 'C'],
    ['export', 'EXP-RC4-MD5', 'cipher.export', 'F'],
    ['NULL', 'NULL-SHA', 'cipher.null', 'F'],
  ])('fail/%s accepted on TLS 1.2', (_label, suite, id, grade) => {
    const { rating, ids } = rated(facts({ protocols: [proto('TLSv1.2', [...MODERN, suite])] }));
    expect(ids).toContain(id);
    expect(rating.grade).toBe(grade);
  });

  it('fail/SSL 3.0 with CBC suites is POODLE: F; with RC4 only it is capped at C', () => {
    const cbc = rated(facts({ protocols: [proto('SSLv3', ['AES128-SHA']), proto('TLSv1.2', MODERN)] }));
    expect(cbc.ids).toContain('protocol.ssl3');
    expect(cbc.rating.grade).toBe('F');
    const rc4 = rated(facts({ protocols: [proto('SSLv3', ['RC4-SHA']), proto('TLSv1.2', MODERN)] }));
    expect(rc4.rating.grade).toBe('C');
  });

  it('fail/compression or no secure renegotiation caps at C', () => {
    expect(
      rated(facts({ handshake: { secureRenegotiation: true, compression: true, fallbackScsv: true } })).rating.grade,
    ).toBe('C');
    expect(
      rated(facts({ handshake: { secureRenegotiation: false, compression: false, fallbackScsv: true } })).rating.grade,
    ).toBe('C');
  });

  it('fail/a certificate a browser refuses is F whatever the configuration', () => {
    for (const over of [
      { expired: true },
      { matchesName: false },
      { trusted: false },
      { signatureAlgorithm: 'sha1WithRSAEncryption' },
    ])
      expect(rated(facts({ certificate: { ...CERT, ...over } })).rating.grade).toBe('F');
  });

  it('ok/an EC P-256 key scores like RSA 3072 (90)', () => {
    expect(rated(facts({ certificate: { ...CERT, keyType: 'EC', keyBits: 256 } })).rating.keyExchangeScore).toBe(90);
  });
});

describe('cipher suite table', () => {
  it('ok/classifies suites by their parts', () => {
    expect(acceptedSuite(0xc02f)).toEqual({
      code: 0xc02f,
      name: 'ECDHE-RSA-AES128-GCM-SHA256',
      bits: 128,
      classes: ['forward-secrecy', 'aead'],
    });
    expect(acceptedSuite(0x000a).classes).toEqual(['cbc', '3des']);
    expect(acceptedSuite(0x0003).classes).toEqual(['rc4', 'export']);
    expect(acceptedSuite(0xc018).classes).toEqual(['forward-secrecy', 'cbc', 'anonymous']);
    expect(acceptedSuite(0x1301).classes).toEqual(['forward-secrecy', 'aead']);
    expect(acceptedSuite(0xfefe)).toEqual({ code: 0xfefe, name: '0xfefe', bits: 0, classes: [] });
  });

  it('ok/TLS 1.3 probes offer only the five TLS 1.3 suites; older versions never offer them', () => {
    expect(candidateSuites('TLSv1.3').sort()).toEqual([0x1301, 0x1302, 0x1303, 0x1304, 0x1305]);
    expect(candidateSuites('TLSv1.2').some((c) => c >= 0x1301 && c <= 0x1305)).toBe(false);
    expect(candidateSuites('TLSv1.0')).not.toContain(0xc02f);
  });
});
