/**
 * OCSP (RFC 6960) in the RFC 5019 lightweight profile: requests are parsed strictly with
 * core/der, responses are encoded directly. Responses carry no nonce so they can be pre-signed
 * and cached.
 */
import { createHash } from 'node:crypto';
import { DerError, TAG, children, contents, expectTag, oidText, readTlv, type Tlv } from '../core/der.js';
import { crlReason, type Signer } from './crl.js';
import { NULL, bits, explicit, generalizedTime, octets, oid, seq, tlv, uintBytes } from './der-writer.js';

export interface OcspCertId {
  /** Dotted OID of the hash in the request (1.3.14.3.2.26 SHA-1, 2.16.840.1.101.3.4.2.1 SHA-256, …). */
  readonly hashAlgorithm: string;
  readonly issuerNameHash: Uint8Array;
  readonly issuerKeyHash: Uint8Array;
  /** Magnitude bytes, leading zeros stripped (serial 0 → empty). */
  readonly serial: Uint8Array;
  /** The CertID SEQUENCE exactly as received (echoed back in the response). */
  readonly der: Uint8Array;
}

export interface OcspRequestInfo {
  readonly certIds: readonly OcspCertId[];
  readonly nonce?: Uint8Array;
}

export class OcspMalformedError extends Error {}

const SHA1 = '1.3.14.3.2.26';
const SHA256 = '2.16.840.1.101.3.4.2.1';
/** Digest lengths of the hashes a CertID may name; a mismatch means a malformed CertID. */
const HASH_LENGTH = new Map<string, number>([
  [SHA1, 20],
  ['2.16.840.1.101.3.4.2.4', 28],
  [SHA256, 32],
  ['2.16.840.1.101.3.4.2.2', 48],
  ['2.16.840.1.101.3.4.2.3', 64],
]);
const NONCE = '1.3.6.1.5.5.7.48.1.2';
const BOOLEAN = 0x01;

/** A detached copy: Buffer#slice would alias the request buffer (often a pooled Buffer). */
const copy = (b: Uint8Array): Uint8Array => new Uint8Array(b);

function fail(message: string): never {
  throw new OcspMalformedError(message);
}

/** Parses a DER OCSPRequest. Throws OcspMalformedError on anything malformed. */
export function parseOcspRequest(der: Uint8Array): OcspRequestInfo {
  try {
    return parseRequest(der);
  } catch (e) {
    if (e instanceof DerError) throw new OcspMalformedError(e.message, { cause: e });
    throw e;
  }
}

function parseRequest(buf: Uint8Array): OcspRequestInfo {
  const top = expectTag(readTlv(buf, 0), TAG.SEQUENCE);
  if (top.end !== buf.length) fail('trailing bytes');
  const outer = children(buf, top);
  if (outer.length < 1 || outer.length > 2) fail('bad OCSPRequest');
  // optionalSignature [0]: checked for shape, not verified (RFC 5019 responders ignore it).
  if (outer.length === 2) checkSignature(buf, expectTag(outer[1], 0xa0));

  const fields = children(buf, expectTag(outer[0], TAG.SEQUENCE));
  let i = 0;
  if (fields[i]?.tag === 0xa0) {
    const version = children(buf, fields[i]!);
    const v = expectTag(version[0], TAG.INTEGER);
    if (version.length !== 1 || v.end - v.contentStart !== 1 || buf[v.contentStart] !== 0) fail('unsupported version');
    i++;
  }
  if (fields[i]?.tag === 0xa1) i++; // requestorName: ignored.
  const requestList = expectTag(fields[i++], TAG.SEQUENCE);
  let nonce: Uint8Array | undefined;
  if (fields[i]?.tag === 0xa2) nonce = parseExtensions(buf, fields[i++]!);
  if (i !== fields.length) fail('unexpected field in TBSRequest');

  const requests = children(buf, requestList);
  if (requests.length === 0) fail('empty requestList');
  const certIds = requests.map((request) => {
    const parts = children(buf, expectTag(request, TAG.SEQUENCE));
    if (parts.length < 1 || parts.length > 2) fail('bad Request');
    // singleRequestExtensions [0]: ignored, but must be well-formed.
    if (parts.length === 2) parseExtensions(buf, expectTag(parts[1], 0xa0));
    return parseCertId(buf, expectTag(parts[0], TAG.SEQUENCE));
  });
  return nonce === undefined ? { certIds } : { certIds, nonce };
}

function checkSignature(buf: Uint8Array, wrapper: Tlv): void {
  const inner = children(buf, wrapper);
  if (inner.length !== 1) fail('bad optionalSignature');
  const parts = children(buf, expectTag(inner[0], TAG.SEQUENCE));
  if (parts.length < 2 || parts.length > 3) fail('bad Signature');
  children(buf, expectTag(parts[0], TAG.SEQUENCE));
  expectTag(parts[1], TAG.BIT_STRING);
  if (parts.length === 3) children(buf, expectTag(parts[2], 0xa0));
}

function parseCertId(buf: Uint8Array, certId: Tlv): OcspCertId {
  const f = children(buf, certId);
  if (f.length !== 4) fail('bad CertID');
  const alg = children(buf, expectTag(f[0], TAG.SEQUENCE));
  if (alg.length < 1 || alg.length > 2) fail('bad hashAlgorithm');
  const hashAlgorithm = oidText(buf, alg[0]!);
  const params = alg[1];
  if (params !== undefined && (params.tag !== TAG.NULL || params.end !== params.contentStart))
    fail('bad hash parameters');
  const issuerNameHash = copy(contents(buf, expectTag(f[1], TAG.OCTET_STRING)));
  const issuerKeyHash = copy(contents(buf, expectTag(f[2], TAG.OCTET_STRING)));
  const expected = HASH_LENGTH.get(hashAlgorithm);
  if (expected !== undefined && (issuerNameHash.length !== expected || issuerKeyHash.length !== expected)) {
    fail('hash length does not match hashAlgorithm');
  }
  const serial = serialMagnitude(contents(buf, expectTag(f[3], TAG.INTEGER)));
  return { hashAlgorithm, issuerNameHash, issuerKeyHash, serial, der: copy(buf.subarray(certId.start, certId.end)) };
}

/** The magnitude of a DER INTEGER's contents; negative serials cannot name our certificates. */
function serialMagnitude(v: Uint8Array): Uint8Array {
  if (v.length === 0) fail('empty INTEGER');
  if (v.length > 1 && ((v[0] === 0 && v[1]! < 0x80) || (v[0] === 0xff && v[1]! >= 0x80))) fail('non-minimal INTEGER');
  if (v[0]! & 0x80) fail('negative serial');
  let i = 0;
  while (i < v.length && v[i] === 0) i++;
  return copy(v.subarray(i));
}

/** Validates an [n] EXPLICIT Extensions and returns the nonce, if any. */
function parseExtensions(buf: Uint8Array, wrapper: Tlv): Uint8Array | undefined {
  const inner = children(buf, wrapper);
  if (inner.length !== 1) fail('bad Extensions wrapper');
  const list = children(buf, expectTag(inner[0], TAG.SEQUENCE));
  if (list.length === 0) fail('empty Extensions');
  let nonce: Uint8Array | undefined;
  for (const ext of list) {
    const f = children(buf, expectTag(ext, TAG.SEQUENCE));
    const id = oidText(buf, f[0]!);
    let j = 1;
    if (f[j]?.tag === BOOLEAN) {
      const b = f[j]!;
      if (b.end - b.contentStart !== 1 || (buf[b.contentStart] !== 0 && buf[b.contentStart] !== 0xff))
        fail('bad BOOLEAN');
      j++;
    }
    const value = contents(buf, expectTag(f[j++], TAG.OCTET_STRING));
    if (j !== f.length) fail('bad Extension');
    if (id === NONCE) {
      if (nonce !== undefined) fail('duplicate nonce');
      nonce = nonceValue(value);
    }
  }
  return nonce;
}

/**
 * RFC 8954 wraps the nonce in an OCTET STRING inside extnValue; some RFC 2560 clients put the
 * raw bytes there. Either is accepted: the value is only informational (responses carry none).
 */
function nonceValue(value: Uint8Array): Uint8Array {
  if (value[0] === TAG.OCTET_STRING) {
    try {
      const t = readTlv(value, 0);
      if (t.end === value.length) return copy(contents(value, t));
    } catch (e) {
      if (!(e instanceof DerError)) throw e;
    }
  }
  return copy(value);
}

export type OcspStatus =
  | { readonly kind: 'good' }
  | { readonly kind: 'revoked'; readonly at: number; readonly reason: number | null }
  | { readonly kind: 'unknown' };

export interface OcspSingle {
  /** CertID DER. */
  readonly certId: Uint8Array;
  readonly status: OcspStatus;
  readonly thisUpdate: number;
  readonly nextUpdate: number;
}

export interface OcspResponseInput {
  /** SHA-1 of the responder's subjectPublicKey BIT STRING value → ResponderID byKey [2]. */
  readonly responderKeyHash: Uint8Array;
  readonly producedAt: number;
  readonly responses: readonly OcspSingle[];
  /** Certificates for BasicOCSPResponse.certs (none when the issuing CA signs directly). */
  readonly certs?: readonly Uint8Array[];
}

const BASIC = oid('1.3.6.1.5.5.7.48.1.1');
const SUCCESSFUL = Uint8Array.of(0x0a, 0x01, 0x00);
const GOOD = Uint8Array.of(0x80, 0x00);
const UNKNOWN = Uint8Array.of(0x82, 0x00);

function certStatus(status: OcspStatus): Uint8Array {
  switch (status.kind) {
    case 'good':
      return GOOD;
    case 'unknown':
      return UNKNOWN;
    case 'revoked': {
      const reason = crlReason(status.reason);
      return reason === null
        ? tlv(0xa1, generalizedTime(status.at))
        : tlv(0xa1, generalizedTime(status.at), explicit(0, reason));
    }
  }
}

/** OCSPResponse{successful, BasicOCSPResponse} signed by `signer`. */
export function buildOcspResponse(input: OcspResponseInput, signer: Signer): Uint8Array {
  if (input.responderKeyHash.length !== 20) throw new RangeError('responderKeyHash must be a SHA-1 hash');
  if (input.responses.length === 0) throw new RangeError('no responses');
  const singles = input.responses.map((r) => {
    if (r.nextUpdate < r.thisUpdate) throw new RangeError('nextUpdate before thisUpdate');
    return seq(
      r.certId,
      certStatus(r.status),
      generalizedTime(r.thisUpdate),
      explicit(0, generalizedTime(r.nextUpdate)),
    );
  });
  // ResponseData: version omitted (v1 is the DEFAULT); byKey [2] is EXPLICIT (the module uses EXPLICIT TAGS).
  const tbs = seq(explicit(2, octets(input.responderKeyHash)), generalizedTime(input.producedAt), seq(...singles));
  const certs = input.certs ?? [];
  const basic =
    certs.length > 0
      ? seq(tbs, signer.algorithm, bits(signer.sign(tbs)), explicit(0, seq(...certs)))
      : seq(tbs, signer.algorithm, bits(signer.sign(tbs)));
  return seq(SUCCESSFUL, explicit(0, seq(BASIC, octets(basic))));
}

export type OcspErrorStatus = 'malformedRequest' | 'internalError' | 'tryLater' | 'sigRequired' | 'unauthorized';

const ERROR_CODES: Record<OcspErrorStatus, number> = {
  malformedRequest: 1,
  internalError: 2,
  tryLater: 3,
  sigRequired: 5,
  unauthorized: 6,
};

/** An OCSPResponse with an error status and no responseBytes (RFC 6960 §2.3). */
export function ocspErrorResponse(status: OcspErrorStatus): Uint8Array {
  return Uint8Array.of(0x30, 0x03, 0x0a, 0x01, ERROR_CODES[status]);
}

/**
 * A CertID DER for a certificate with `serial` issued by the CA with subject `issuerNameDer` and
 * SubjectPublicKeyInfo `issuerSpkiDer`. Encoded as OpenSSL does (hash parameters NULL), so it is
 * byte-identical to the CertIDs of `openssl ocsp` requests.
 */
export function certIdFor(
  issuerNameDer: Uint8Array,
  issuerSpkiDer: Uint8Array,
  serial: Uint8Array,
  hash: 'sha1' | 'sha256' = 'sha1',
): Uint8Array {
  const spki = children(issuerSpkiDer, expectTag(readTlv(issuerSpkiDer, 0), TAG.SEQUENCE));
  const key = contents(issuerSpkiDer, expectTag(spki[1], TAG.BIT_STRING));
  if (key.length === 0 || key[0] !== 0) throw new RangeError('subjectPublicKey has unused bits');
  const digest = (data: Uint8Array) => createHash(hash).update(data).digest();
  return seq(
    seq(oid(hash === 'sha1' ? SHA1 : SHA256), NULL),
    octets(digest(issuerNameDer)),
    octets(digest(key.subarray(1))),
    uintBytes(serial),
  );
}
