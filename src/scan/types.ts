// What a scan of one host finds (DESIGN §5.8): the TLS configuration, the certificate served, the
// HTTP front door and a rating after the structure of Qualys' SSL Server Rating Guide. The scanner
// (scanHost) is network in, result out: it never writes; the RA stores what it returns.

export const TLS_VERSIONS = ['SSLv3', 'TLSv1.0', 'TLSv1.1', 'TLSv1.2', 'TLSv1.3'] as const;
export type TlsVersion = (typeof TLS_VERSIONS)[number];

/** A rating, best first; `F` also for a certificate a browser would refuse (expired, wrong name, untrusted). */
export const GRADES = ['A+', 'A', 'A-', 'B', 'C', 'D', 'E', 'F'] as const;
export type Grade = (typeof GRADES)[number];

export type Severity = 'critical' | 'high' | 'medium' | 'low' | 'info';

/** One thing worth telling the site's owner, with a stable id (e.g. `protocol.tls10`, `cert.expired`). */
export interface Finding {
  readonly id: string;
  readonly severity: Severity;
  readonly title: string;
  readonly detail?: string;
}

/** A cipher suite the server accepted for one protocol version. */
export interface AcceptedSuite {
  /** IANA code point, e.g. 0xc02f. */
  readonly code: number;
  /** OpenSSL's name (what sslscan prints), e.g. `ECDHE-RSA-AES128-GCM-SHA256`. */
  readonly name: string;
  /** Symmetric key bits. */
  readonly bits: number;
  /** Any of: `forward-secrecy`, `aead`, `cbc`, `3des`, `rc4`, `export`, `null`, `anonymous`. */
  readonly classes: readonly string[];
}

export interface ProtocolResult {
  readonly version: TlsVersion;
  /** true offered, false refused, null could not test (the engine cannot speak it to this server). */
  readonly offered: boolean | null;
  /** Accepted suites in the server's order of preference when it has one, else in the order found. */
  readonly suites: readonly AcceptedSuite[];
  /** Whether the server picks by its own preference (null: one suite only, or not offered). */
  readonly serverPreference: boolean | null;
}

export interface CertificateResult {
  /** PEM of the served chain, leaf first, as sent. */
  readonly chainPem: readonly string[];
  readonly subject: string;
  readonly issuer: string;
  readonly notBefore: number;
  readonly notAfter: number;
  readonly expired: boolean;
  readonly matchesName: boolean;
  /** The served chain leads to a trusted root (the system's or one given to the scanner). */
  readonly trusted: boolean;
  /** Every certificate needed between the leaf and a trusted root was sent. */
  readonly chainComplete: boolean;
  /** Each certificate is followed by its issuer. */
  readonly chainInOrder: boolean;
  readonly keyType: 'RSA' | 'EC' | 'other';
  readonly keyBits: number;
  readonly signatureAlgorithm: string;
  /** The leaf is the certificate the order was issued (null: no certificate to compare with). */
  readonly isOrderCertificate: boolean | null;
  /** An OCSP response was stapled to the handshake. */
  readonly ocspStapled: boolean;
}

export interface HttpResult {
  /** `http://name/` answers with a redirect to `https://name…` (null: nothing listens on the HTTP port). */
  readonly redirectsToHttps: boolean | null;
  readonly hsts: { readonly maxAge: number; readonly includeSubDomains: boolean; readonly preload: boolean } | null;
  /** The security headers a current scanner checks, lower-cased name → value (null: absent). */
  readonly headers: Readonly<Record<string, string | null>>;
}

export interface HandshakeResult {
  /** RFC 5746 renegotiation_info answered (null: could not test). */
  readonly secureRenegotiation: boolean | null;
  /** The server accepted TLS compression (CRIME). */
  readonly compression: boolean | null;
  /** The server refused a downgraded ClientHello carrying TLS_FALLBACK_SCSV (null: only one version offered). */
  readonly fallbackScsv: boolean | null;
}

export interface Rating {
  readonly grade: Grade;
  /** 0–100 each, and the weighted total (30 % protocol, 30 % key exchange, 40 % cipher). */
  readonly protocolScore: number;
  readonly keyExchangeScore: number;
  readonly cipherScore: number;
  readonly score: number;
  /** Why the grade is below what the score alone gives, e.g. `TLS 1.0 offered: at most B`. */
  readonly caps: readonly string[];
}

/** The result of scanning one name. */
export type HostReport =
  | {
      readonly status: 'scanned';
      readonly name: string;
      readonly address: string;
      readonly port: number;
      readonly startedAt: number;
      readonly durationMs: number;
      readonly protocols: readonly ProtocolResult[];
      readonly certificate: CertificateResult | null;
      readonly http: HttpResult;
      readonly handshake: HandshakeResult;
      readonly findings: readonly Finding[];
      readonly rating: Rating;
    }
  | {
      /** Nothing to rate: no address, a refused address, nothing listening, no TLS, a timeout. */
      readonly status: 'could-not-scan';
      readonly name: string;
      readonly address: string | null;
      readonly port: number;
      readonly startedAt: number;
      readonly durationMs: number;
      readonly problem: string;
    };

/** What the scanner needs from its caller: how to resolve names and what it may reach. */
export interface ScanOptions {
  /** The addresses of a name (the RA passes the DCV resolver, so scans use CERTDESK_DNS_SERVERS). */
  readonly lookup: (name: string) => Promise<readonly string[]>;
  /** Loopback, private, link-local and reserved addresses are refused unless this is set (the DCV rule). */
  readonly allowPrivate: boolean;
  /** TLS port (443; tests use their own). */
  readonly port: number;
  /** HTTP port for the redirect check (80; tests use their own). */
  readonly httpPort: number;
  /** The whole scan of one host gives up after this many milliseconds (default 5000). */
  readonly timeoutMs?: number;
  /** Trust anchors besides the system's (PEM): the built-in CA's roots. */
  readonly trustedRoots?: readonly string[];
  /** The current time in whole UTC seconds (the service's clock: expiry is judged by it). */
  readonly now: () => number;
}

export interface ScanTarget {
  readonly name: string;
  /** The order's current certificate (PEM), to tell whether the site serves it. */
  readonly orderCertificatePem?: string;
}

/** The scanner's name and version, shown as ConfigurationAssessment.Engine. */
export const ENGINE = 'certdesk-scan 1.0';
/** The version of the rating criteria (docs/scan-criteria.md), shown as ConfigurationAssessment.CriteriaVersion. */
export const CRITERIA_VERSION = '2026.1';
