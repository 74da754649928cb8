// What a scan tells the site's owner: one finding per problem, with a stable id and a severity
// (docs/scan-criteria.md lists them all). Pure: the same scan gives the same findings.
import type { CertificateResult, Finding, HandshakeResult, HttpResult, ProtocolResult, Severity } from './types.js';

export interface ScanFacts {
  readonly protocols: readonly ProtocolResult[];
  readonly certificate: CertificateResult | null;
  readonly handshake: HandshakeResult;
  readonly http: HttpResult;
  /** The service's clock, whole UTC seconds. */
  readonly now: number;
}

/** HSTS shorter than this earns a finding and no A+ (SSL Labs' threshold: 180 days). */
export const HSTS_MIN_SECONDS = 180 * 86_400;

const f = (id: string, severity: Severity, title: string, detail?: string): Finding =>
  detail === undefined ? { id, severity, title } : { id, severity, title, detail };

/** Every finding of a scan, most severe first. */
export function findingsOf(s: ScanFacts): Finding[] {
  const out = [...certificateFindings(s), ...protocolFindings(s), ...cipherFindings(s), ...handshakeFindings(s)];
  out.push(...httpFindings(s.http));
  const order: Severity[] = ['critical', 'high', 'medium', 'low', 'info'];
  return out.sort((a, b) => order.indexOf(a.severity) - order.indexOf(b.severity));
}

function certificateFindings(s: ScanFacts): Finding[] {
  const c = s.certificate;
  if (c === null) return [f('cert.none', 'critical', 'No certificate could be read from the server')];
  const out: Finding[] = [];
  if (c.expired) out.push(f('cert.expired', 'critical', 'The certificate has expired', `notAfter ${iso(c.notAfter)}`));
  if (s.now < c.notBefore)
    out.push(f('cert.not-yet-valid', 'critical', 'The certificate is not valid yet', `notBefore ${iso(c.notBefore)}`));
  if (!c.matchesName) out.push(f('cert.name-mismatch', 'critical', 'The certificate is not valid for this name'));
  if (!c.trusted) out.push(f('cert.untrusted', 'critical', 'The chain does not lead to a trusted root'));
  if (/md5|sha1/i.test(c.signatureAlgorithm))
    out.push(f('cert.weak-signature', 'critical', 'The certificate is signed with MD5 or SHA-1', c.signatureAlgorithm));
  if (c.keyType === 'RSA' && c.keyBits < 2048)
    out.push(f('cert.weak-key', c.keyBits < 1024 ? 'critical' : 'high', `RSA key of ${c.keyBits} bits`));
  if (!c.chainComplete)
    out.push(f('cert.chain-incomplete', 'medium', 'The server does not send every intermediate certificate'));
  if (!c.chainInOrder)
    out.push(f('cert.chain-order', 'low', 'The chain is not sent in order (leaf, then each issuer)'));
  if (c.isOrderCertificate === false)
    out.push(f('cert.not-order-certificate', 'low', "The server does not serve this order's certificate"));
  if (!c.ocspStapled) out.push(f('cert.no-ocsp-stapling', 'info', 'No OCSP response is stapled to the handshake'));
  return out;
}

const VERSION_FINDINGS = {
  SSLv3: ['protocol.ssl3', 'critical', 'SSL 3.0 is offered (POODLE)'],
  'TLSv1.0': ['protocol.tls10', 'high', 'TLS 1.0 is offered'],
  'TLSv1.1': ['protocol.tls11', 'high', 'TLS 1.1 is offered'],
} as const;

function protocolFindings(s: ScanFacts): Finding[] {
  const out: Finding[] = [];
  const offered = (v: string) => s.protocols.some((p) => p.version === v && p.offered === true);
  for (const [version, [id, severity, title]] of Object.entries(VERSION_FINDINGS))
    if (offered(version)) out.push(f(id, severity, title));
  if (!offered('TLSv1.2') && !offered('TLSv1.3'))
    out.push(f('protocol.no-tls12', 'high', 'Neither TLS 1.2 nor TLS 1.3 is offered'));
  else if (!offered('TLSv1.3')) out.push(f('protocol.no-tls13', 'low', 'TLS 1.3 is not offered'));
  for (const p of s.protocols)
    if (p.offered === null) out.push(f('protocol.untested', 'info', `${p.version} could not be tested`));
  return out;
}

/** Suite classes that are a finding of their own wherever they are accepted. */
const CLASS_FINDINGS: ReadonlyArray<readonly [string, string, Severity, string]> = [
  ['rc4', 'cipher.rc4', 'critical', 'RC4 suites are accepted'],
  ['export', 'cipher.export', 'critical', 'Export-grade suites are accepted (FREAK, Logjam)'],
  ['null', 'cipher.null', 'critical', 'Suites without encryption are accepted'],
  ['anonymous', 'cipher.anonymous', 'critical', 'Anonymous (unauthenticated) suites are accepted'],
  ['3des', 'cipher.3des', 'high', '3DES suites are accepted (Sweet32)'],
];

function cipherFindings(s: ScanFacts): Finding[] {
  const suites = s.protocols.flatMap((p) => (p.offered === true ? p.suites : []));
  if (suites.length === 0) return [];
  const out: Finding[] = [];
  const having = (cls: string) => suites.filter((x) => x.classes.includes(cls));
  for (const [cls, id, severity, title] of CLASS_FINDINGS) {
    const names = [...new Set(having(cls).map((x) => x.name))];
    if (names.length > 0) out.push(f(id, severity, title, names.join(', ')));
  }
  if (having('forward-secrecy').length === 0)
    out.push(f('cipher.no-forward-secrecy', 'medium', 'No suite with forward secrecy is accepted'));
  else if (having('forward-secrecy').length < suites.length)
    out.push(f('cipher.some-without-forward-secrecy', 'low', 'Some accepted suites lack forward secrecy'));
  if (having('aead').length === 0) out.push(f('cipher.cbc-only', 'medium', 'No AEAD suite is accepted (CBC only)'));
  else if (having('cbc').length > 0) out.push(f('cipher.cbc', 'low', 'CBC suites are accepted besides AEAD ones'));
  return out;
}

function handshakeFindings(s: ScanFacts): Finding[] {
  const h = s.handshake;
  const out: Finding[] = [];
  if (h.secureRenegotiation === false)
    out.push(f('handshake.insecure-renegotiation', 'high', 'Secure renegotiation (RFC 5746) is not supported'));
  if (h.compression === true) out.push(f('handshake.compression', 'high', 'TLS compression is accepted (CRIME)'));
  if (h.fallbackScsv === false)
    out.push(f('handshake.no-fallback-scsv', 'medium', 'Downgrades are not refused (no TLS_FALLBACK_SCSV)'));
  return out;
}

function httpFindings(h: HttpResult): Finding[] {
  const out: Finding[] = [];
  if (h.hsts === null) out.push(f('http.no-hsts', 'medium', 'No HTTP Strict Transport Security'));
  else if (h.hsts.maxAge < HSTS_MIN_SECONDS)
    out.push(f('http.hsts-short', 'low', 'HSTS max-age is shorter than 180 days', `max-age=${h.hsts.maxAge}`));
  if (h.redirectsToHttps === false) out.push(f('http.no-redirect', 'low', 'http:// does not redirect to https://'));
  const missing = (name: string, severity: Severity) => {
    if (h.headers[name] === null || h.headers[name] === undefined)
      out.push(f(`http.missing-header.${name}`, severity, `No ${name} header`));
  };
  missing('content-security-policy', 'low');
  missing('x-frame-options', 'low');
  missing('x-content-type-options', 'low');
  missing('referrer-policy', 'info');
  missing('permissions-policy', 'info');
  return out;
}

function iso(seconds: number): string {
  return new Date(seconds * 1000).toISOString();
}
