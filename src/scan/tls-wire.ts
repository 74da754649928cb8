// The bytes of our own TLS handshake probes: a ClientHello for any version from SSLv3 to TLS 1.3
// (RFC 6101, 2246, 4346, 5246, 8446) and a reader of the server's plaintext flight (ServerHello,
// Certificate, CertificateStatus, ServerHelloDone, alerts). No crypto: a probe never finishes a
// handshake, it only reads what the server chooses, which is all a configuration scan needs.
import { randomBytes } from 'node:crypto';
import type { TlsVersion } from './types.js';

export const VERSION_CODE: Readonly<Record<TlsVersion, number>> = {
  SSLv3: 0x0300,
  'TLSv1.0': 0x0301,
  'TLSv1.1': 0x0302,
  'TLSv1.2': 0x0303,
  'TLSv1.3': 0x0304,
};

/** RFC 5746 §3.3: the SCSV a client sends instead of an empty renegotiation_info (SSLv3 has no extensions). */
export const EMPTY_RENEGOTIATION_INFO_SCSV = 0x00ff;
/** RFC 7507: signals a downgraded retry; a server offering a higher version must answer inappropriate_fallback. */
export const FALLBACK_SCSV = 0x5600;

export const ALERT = { handshakeFailure: 40, protocolVersion: 70, insufficientSecurity: 71, inappropriateFallback: 86 };

const EXT = {
  serverName: 0,
  statusRequest: 5,
  supportedGroups: 10,
  ecPointFormats: 11,
  signatureAlgorithms: 13,
  supportedVersions: 43,
  keyShare: 51,
  renegotiationInfo: 0xff01,
} as const;

/** x25519, secp256r1, secp384r1, secp521r1, x448 (RFC 8422, 7748). */
const EC_GROUPS = [0x001d, 0x0017, 0x0018, 0x0019, 0x001e];
/** TLS 1.3 may also pick finite-field groups (RFC 7919); a HelloRetryRequest then still names the suite. */
const TLS13_GROUPS = [...EC_GROUPS, 0x0100, 0x0101, 0x0102];
/** ECDSA, EdDSA, RSA-PSS, PKCS#1 (SHA-2, SHA-1), DSA: everything a server might sign with. */
const SIGNATURE_ALGORITHMS = [
  0x0403, 0x0503, 0x0603, 0x0807, 0x0808, 0x0804, 0x0805, 0x0806, 0x0809, 0x080a, 0x080b, 0x0401, 0x0501, 0x0601,
  0x0303, 0x0301, 0x0302, 0x0402, 0x0203, 0x0201, 0x0202,
];

/** What one ClientHello offers. */
export interface HelloSpec {
  readonly version: TlsVersion;
  readonly suites: readonly number[];
  /** SNI host name (left out for an IP address). */
  readonly serverName?: string;
  /** Offer DEFLATE besides null compression (CRIME test). */
  readonly compression?: boolean;
  /** Add TLS_FALLBACK_SCSV. */
  readonly fallbackScsv?: boolean;
  /** Ask for a stapled OCSP response (status_request). */
  readonly statusRequest?: boolean;
}

const u8 = (n: number) => Buffer.from([n & 0xff]);
const u16 = (n: number) => Buffer.from([(n >> 8) & 0xff, n & 0xff]);
const u24 = (n: number) => Buffer.from([(n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff]);
const vec8 = (b: Buffer) => Buffer.concat([u8(b.length), b]);
const vec16 = (b: Buffer) => Buffer.concat([u16(b.length), b]);
const list16 = (items: readonly number[]) => vec16(Buffer.concat(items.map(u16)));
const ext = (type: number, body: Buffer) => Buffer.concat([u16(type), vec16(body)]);

/** One ClientHello in one TLS record. */
export function clientHello(spec: HelloSpec): Buffer {
  const tls13 = spec.version === 'TLSv1.3';
  const suites = [...spec.suites];
  if (spec.version === 'SSLv3') suites.push(EMPTY_RENEGOTIATION_INFO_SCSV);
  if (spec.fallbackScsv === true) suites.push(FALLBACK_SCSV);
  const extensions: Buffer[] = [];
  if (spec.version !== 'SSLv3') {
    if (spec.serverName !== undefined) {
      const host = Buffer.from(spec.serverName, 'ascii');
      extensions.push(ext(EXT.serverName, vec16(Buffer.concat([u8(0), vec16(host)]))));
    }
    extensions.push(ext(EXT.supportedGroups, list16(tls13 ? TLS13_GROUPS : EC_GROUPS)));
    extensions.push(ext(EXT.ecPointFormats, vec8(Buffer.from([0]))));
    if (spec.version === 'TLSv1.2' || tls13)
      extensions.push(ext(EXT.signatureAlgorithms, list16(SIGNATURE_ALGORITHMS)));
    if (spec.statusRequest === true) extensions.push(ext(EXT.statusRequest, Buffer.from([1, 0, 0, 0, 0])));
    if (tls13) {
      extensions.push(ext(EXT.supportedVersions, vec8(u16(VERSION_CODE['TLSv1.3']))));
      // A random point is a valid-looking x25519 share: the server never gets to use it.
      const share = Buffer.concat([u16(0x001d), vec16(randomBytes(32))]);
      extensions.push(ext(EXT.keyShare, vec16(share)));
    } else {
      extensions.push(ext(EXT.renegotiationInfo, vec8(Buffer.alloc(0))));
    }
  }
  const body = Buffer.concat([
    u16(tls13 ? VERSION_CODE['TLSv1.2'] : VERSION_CODE[spec.version]),
    randomBytes(32),
    // TLS 1.3 middlebox compatibility mode (RFC 8446 D.4) wants a legacy session id.
    vec8(tls13 ? randomBytes(32) : Buffer.alloc(0)),
    list16(suites),
    vec8(Buffer.from(spec.compression === true && !tls13 ? [1, 0] : [0])),
    ...(extensions.length > 0 ? [vec16(Buffer.concat(extensions))] : []),
  ]);
  const handshake = Buffer.concat([u8(1), u24(body.length), body]);
  const recordVersion = spec.version === 'SSLv3' ? 0x0300 : 0x0301;
  return Buffer.concat([u8(22), u16(recordVersion), u16(handshake.length), handshake]);
}

export interface ServerHello {
  /** The version the server chose (supported_versions for TLS 1.3), as a wire code. */
  readonly version: number;
  readonly cipher: number;
  readonly compression: number;
  /** A TLS 1.3 HelloRetryRequest (it still names the suite chosen). */
  readonly helloRetry: boolean;
  readonly extensions: ReadonlyMap<number, Buffer>;
}

/** What the server's flight held, as far as it was read. */
export interface ServerFlight {
  readonly hello?: ServerHello;
  /** DER certificates of the Certificate message, as sent (TLS ≤ 1.2 only: 1.3 encrypts it). */
  readonly certificates?: readonly Buffer[];
  /** DER OCSP response of a CertificateStatus message. */
  readonly ocspResponse?: Buffer;
  readonly alert?: number;
  /** The flight is complete: ServerHelloDone, or the ServerHello of TLS 1.3 (the rest is encrypted). */
  readonly done: boolean;
  /** The bytes are not TLS records (a plaintext service, an SSLv2-only server). */
  readonly notTls: boolean;
}

/** SHA-256("HelloRetryRequest"), the random of a HelloRetryRequest (RFC 8446 §4.1.3). */
const HRR_RANDOM = Buffer.from('cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c', 'hex');

/** Parses as much of the server's flight as `data` holds; call again with more bytes until `done`, an alert or notTls. */
export function readServerFlight(data: Buffer): ServerFlight {
  const handshake: Buffer[] = [];
  let alert: number | undefined;
  let pos = 0;
  let encrypted = false;
  while (pos + 5 <= data.length) {
    const type = data[pos]!;
    const major = data[pos + 1]!;
    const length = data.readUInt16BE(pos + 3);
    if (type < 20 || type > 23 || major !== 3) return { done: false, notTls: true };
    if (pos + 5 + length > data.length) break;
    const fragment = data.subarray(pos + 5, pos + 5 + length);
    if (type === 22 && !encrypted) handshake.push(fragment);
    else if (type === 21 && fragment.length >= 2 && !encrypted) alert = fragment[1];
    else if (type === 23) encrypted = true;
    pos += 5 + length;
  }
  if (pos === 0 && data.length >= 1 && (data[0]! < 20 || data[0]! > 23)) return { done: false, notTls: true };
  const flight = parseHandshake(Buffer.concat(handshake));
  return { ...flight, ...(alert === undefined ? {} : { alert }), notTls: false };
}

function parseHandshake(stream: Buffer): Omit<ServerFlight, 'alert' | 'notTls'> {
  let hello: ServerHello | undefined;
  let certificates: Buffer[] | undefined;
  let ocspResponse: Buffer | undefined;
  let done = false;
  let pos = 0;
  while (pos + 4 <= stream.length && !done) {
    const type = stream[pos]!;
    const length = stream.readUIntBE(pos + 1, 3);
    if (pos + 4 + length > stream.length) break;
    const body = stream.subarray(pos + 4, pos + 4 + length);
    pos += 4 + length;
    if (type === 2) {
      hello = parseServerHello(body);
      if (hello.version === VERSION_CODE['TLSv1.3']) done = true;
    } else if (type === 11) certificates = parseCertificateList(body);
    else if (type === 22 && body[0] === 1) ocspResponse = body.subarray(4, 4 + body.readUIntBE(1, 3));
    else if (type === 14) done = true;
  }
  return {
    ...(hello === undefined ? {} : { hello }),
    ...(certificates === undefined ? {} : { certificates }),
    ...(ocspResponse === undefined ? {} : { ocspResponse }),
    done,
  };
}

function parseServerHello(body: Buffer): ServerHello {
  const legacyVersion = body.readUInt16BE(0);
  const random = body.subarray(2, 34);
  let pos = 34;
  pos += 1 + body[pos]!; // session id
  const cipher = body.readUInt16BE(pos);
  const compression = body[pos + 2]!;
  pos += 3;
  const extensions = new Map<number, Buffer>();
  if (pos + 2 <= body.length) {
    const end = Math.min(body.length, pos + 2 + body.readUInt16BE(pos));
    pos += 2;
    while (pos + 4 <= end) {
      const type = body.readUInt16BE(pos);
      const length = body.readUInt16BE(pos + 2);
      extensions.set(type, body.subarray(pos + 4, pos + 4 + length));
      pos += 4 + length;
    }
  }
  const selected = extensions.get(EXT.supportedVersions);
  const version = selected !== undefined && selected.length === 2 ? selected.readUInt16BE(0) : legacyVersion;
  return { version, cipher, compression, helloRetry: random.equals(HRR_RANDOM), extensions };
}

function parseCertificateList(body: Buffer): Buffer[] {
  const certs: Buffer[] = [];
  const end = Math.min(body.length, 3 + body.readUIntBE(0, 3));
  for (let pos = 3; pos + 3 <= end;) {
    const length = body.readUIntBE(pos, 3);
    certs.push(Buffer.from(body.subarray(pos + 3, pos + 3 + length)));
    pos += 3 + length;
  }
  return certs;
}

/** RFC 5746: the server answered renegotiation_info (an empty one, on an initial handshake). */
export function hasRenegotiationInfo(hello: ServerHello): boolean {
  return hello.extensions.has(EXT.renegotiationInfo);
}
