/**
 * The one reader of PKCS#10 certificate requests (RFC 2986). POST /ValidateCSR, the order rules
 * (src/validation/csr.ts) and the CA's own gate (src/ca/checks.ts) all read requests here, with
 * one size limit and one strictness. Reading checks the structure and decodes the names; the
 * self-signature is verified by verifyCsr (csr-verify.ts), so that a caller may apply its own
 * policy (the CA's key checks) in between. Pure: no I/O, no state.
 */
import { createHash } from 'node:crypto';
import { DerError, TAG, children, expectTag, oidText, readTlv, stringText, type Tlv } from './der.js';
import { CertdeskError } from './errors.js';
import { decodeCsrText, requestedSanExtension } from './pem.js';
import { readSpki, type ParsedSpki } from './spki.js';

/**
 * Larger inputs are refused before any parsing: text of more characters, DER of more bytes.
 * A request with 250 SANs is about 10 KiB.
 */
export const MAX_CSR_SIZE = 64 * 1024;

/** A certificate request as read by readCsr: structure checked, signature not yet verified. */
export interface CsrRequest {
  /** The request's DER, a private copy (what HashMD5/HashSHA256 cover). */
  readonly der: Uint8Array;
  /** The first value of each subject attribute, '' when absent. */
  readonly commonName: string;
  readonly organization: string;
  readonly organizationUnit: string;
  readonly locality: string;
  readonly state: string;
  readonly country: string;
  /** Subject emailAddress, else the first rfc822Name SAN, else ''. */
  readonly email: string;
  /** SAN dNSName entries, lower-cased, in request order. */
  readonly dnsNames: readonly string[];
  /** SAN rfc822Name entries, in request order. */
  readonly emails: readonly string[];
  /** SAN iPAddress entries (IPv6 in RFC 5952 form). */
  readonly ipAddresses: readonly string[];
  /** The SubjectPublicKeyInfo DER, a view into `der` (so the hashes cover it); `publicKey.der`. */
  readonly spkiDer: Uint8Array;
  readonly publicKey: ParsedSpki;
  /** Signature algorithm OID and its parameters (offsets into `der`). */
  readonly signatureOid: string;
  readonly signatureParams: Tlv | undefined;
  /** The signature BIT STRING's value and the signed bytes (the CertificationRequestInfo). */
  readonly signature: Uint8Array;
  readonly signed: Uint8Array;
  /** MD5 and SHA-256 of `der`, upper-case hex. */
  readonly hashMd5: string;
  readonly hashSha256: string;
}

type SubjectField = 'commonName' | 'organization' | 'organizationUnit' | 'locality' | 'state' | 'country' | 'email';
/** Attribute type OIDs of the subject fields read (RFC 5280 §4.1.2.4, PKCS#9 emailAddress). */
const SUBJECT_OIDS: Record<string, SubjectField> = {
  '2.5.4.3': 'commonName',
  '2.5.4.10': 'organization',
  '2.5.4.11': 'organizationUnit',
  '2.5.4.7': 'locality',
  '2.5.4.8': 'state',
  '2.5.4.6': 'country',
  '1.2.840.113549.1.9.1': 'email',
};

const READ = new WeakSet<object>();

/** True only for a result of readCsr in this process (a copy or an imitation is not one). */
export function isReadCsr(value: unknown): boolean {
  return typeof value === 'object' && value !== null && READ.has(value);
}

/** The error of every refused request: kind invalidCsr, field CSR. */
export function invalidCsr(message: string, cause?: unknown): CertdeskError {
  return new CertdeskError('invalidCsr', message, { field: 'CSR', cause });
}

/**
 * Reads a PKCS#10 request given as DER bytes, as PEM text (label CERTIFICATE REQUEST or NEW
 * CERTIFICATE REQUEST, LF or CRLF, surrounding whitespace allowed) or as a bare base64 body.
 * Strict DER: trailing bytes, a version other than 1, extra members, unused bits in the signature
 * and undecodable subject, SAN or key fields are refused. The input is copied; the result is frozen.
 * Throws `CertdeskError('invalidCsr', <what is wrong>, {field: 'CSR'})`, and never anything else.
 */
export function readCsr(input: string | Uint8Array): CsrRequest {
  try {
    return read(decodeInput(input));
  } catch (e) {
    if (e instanceof CertdeskError) throw e;
    throw invalidCsr('The CSR could not be parsed: it is not a valid PKCS#10 certificate request.', e);
  }
}

function decodeInput(input: unknown): Uint8Array {
  if (input instanceof Uint8Array) {
    if (input.length === 0) throw invalidCsr('The CSR is empty.');
    if (input.length > MAX_CSR_SIZE) throw invalidCsr(`The CSR is larger than ${MAX_CSR_SIZE / 1024} KiB.`);
    return new Uint8Array(input);
  }
  if (typeof input !== 'string')
    throw invalidCsr('The CSR could not be parsed: it must be DER bytes or PEM text (a string).');
  const decoded = decodeCsrText(input, MAX_CSR_SIZE);
  if ('problem' in decoded) throw invalidCsr(decoded.problem);
  return decoded.der;
}

function read(der: Uint8Array): CsrRequest {
  // Step 1: CertificationRequest ::= SEQUENCE { certificationRequestInfo, signatureAlgorithm, signature }.
  let outer: Tlv;
  try {
    outer = readTlv(der, 0);
  } catch (e) {
    throw invalidCsr('The CSR could not be parsed: its DER encoding is truncated or damaged.', e);
  }
  if (outer.end !== der.length)
    throw invalidCsr(`The CSR could not be parsed: it has ${der.length - outer.end} bytes of trailing data.`);
  let parts: Tlv[];
  let criParts: Tlv[];
  try {
    parts = children(der, expectTag(outer, TAG.SEQUENCE));
    if (parts.length !== 3) throw new DerError('not three parts');
    expectTag(parts[1], TAG.SEQUENCE);
    expectTag(parts[2], TAG.BIT_STRING);
    criParts = children(der, expectTag(parts[0], TAG.SEQUENCE));
    const version = expectTag(criParts[0], TAG.INTEGER);
    if (version.end - version.contentStart !== 1 || der[version.contentStart] !== 0)
      throw new DerError('not version 1');
    // The attributes are mandatory in RFC 2986 but some clients omit an empty set.
    if (criParts.length !== 3 && criParts.length !== 4) throw new DerError('bad CertificationRequestInfo');
  } catch (e) {
    throw invalidCsr('The CSR could not be parsed: it is not a PKCS#10 certificate request.', e);
  }

  // Step 2: the fields.
  const [cri, algId, sig] = parts as [Tlv, Tlv, Tlv];
  const [, subject, spki, attributes] = criParts as [Tlv, Tlv, Tlv, Tlv | undefined];
  let fields: Record<SubjectField, string>;
  let names: { dns: string[]; email: string[]; ip: string[] };
  let signatureOid: string;
  let algParts: Tlv[];
  let spkiDer: Uint8Array;
  try {
    algParts = children(der, algId);
    signatureOid = oidText(der, algParts[0]!);
    if (algParts.length > 2) throw new DerError('extra AlgorithmIdentifier member');
    if (sig.end - sig.contentStart < 2 || der[sig.contentStart] !== 0) throw new DerError('bad signature BIT STRING');
    fields = subjectFields(der, expectTag(subject, TAG.SEQUENCE));
    names =
      attributes === undefined ? { dns: [], email: [], ip: [] } : subjectAltNames(der, expectTag(attributes, 0xa0));
    spkiDer = der.subarray(expectTag(spki, TAG.SEQUENCE).start, spki.end);
  } catch (e) {
    throw invalidCsr('The CSR could not be parsed: its fields do not decode.', e);
  }
  let publicKey: ParsedSpki;
  try {
    publicKey = Object.freeze(readSpki(spkiDer));
  } catch (e) {
    throw invalidCsr('The CSR could not be parsed: its public key is not a valid SubjectPublicKeyInfo.', e);
  }

  // Step 3: the facts callers work with.
  const request: CsrRequest = Object.freeze({
    der,
    ...fields,
    email: fields.email || (names.email[0] ?? ''),
    dnsNames: Object.freeze(names.dns),
    emails: Object.freeze(names.email),
    ipAddresses: Object.freeze(names.ip),
    spkiDer,
    publicKey,
    signatureOid,
    signatureParams: algParts[1],
    signature: der.subarray(sig.contentStart + 1, sig.end),
    signed: der.subarray(cri.start, cri.end),
    hashMd5: createHash('md5').update(der).digest('hex').toUpperCase(),
    hashSha256: createHash('sha256').update(der).digest('hex').toUpperCase(),
  });
  READ.add(request);
  return request;
}

/** The first value of each subject field (Name: SEQUENCE OF SET OF {type, value}). */
function subjectFields(der: Uint8Array, name: Tlv): Record<SubjectField, string> {
  const out: Partial<Record<SubjectField, string>> = {};
  for (const rdn of children(der, name)) {
    for (const atv of children(der, expectTag(rdn, TAG.SET))) {
      const [type, value, extra] = children(der, expectTag(atv, TAG.SEQUENCE));
      if (type === undefined || value === undefined || extra !== undefined) throw new DerError('bad subject attribute');
      const field = SUBJECT_OIDS[oidText(der, type)];
      if (field !== undefined && out[field] === undefined) out[field] = stringText(der, value) ?? '';
    }
  }
  const get = (f: SubjectField) => out[f] ?? '';
  return {
    commonName: get('commonName'),
    organization: get('organization'),
    organizationUnit: get('organizationUnit'),
    locality: get('locality'),
    state: get('state'),
    country: get('country'),
    email: get('email'),
  };
}

/**
 * The SAN of the extensionRequest attribute: rfc822Name [1], dNSName [2] (lower-cased) and
 * iPAddress [7] entries (RFC 5280 §4.2.1.6); other kinds are skipped.
 */
function subjectAltNames(der: Uint8Array, attributes: Tlv): { dns: string[]; email: string[]; ip: string[] } {
  const out = { dns: [] as string[], email: [] as string[], ip: [] as string[] };
  const octets = requestedSanExtension(der, attributes);
  if (octets === undefined) return out;
  const list = readTlv(der, octets.contentStart, octets.end);
  if (list.end !== octets.end) throw new DerError('trailing bytes in the SAN extension');
  for (const item of children(der, expectTag(list, TAG.SEQUENCE))) {
    const bytes = der.subarray(item.contentStart, item.end);
    if (item.tag === 0x81) out.email.push(Buffer.from(bytes).toString('latin1'));
    else if (item.tag === 0x82) out.dns.push(Buffer.from(bytes).toString('latin1').toLowerCase());
    else if (item.tag === 0x87) out.ip.push(ipText(bytes));
  }
  return out;
}

function ipText(bytes: Uint8Array): string {
  if (bytes.length === 4) return [...bytes].join('.');
  if (bytes.length !== 16) throw new DerError('bad iPAddress length');
  const groups = [...Array(8).keys()].map((i) => ((bytes[2 * i]! << 8) | bytes[2 * i + 1]!).toString(16));
  // The URL parser writes IPv6 in the RFC 5952 canonical (compressed) form.
  return new URL(`http://[${groups.join(':')}]`).hostname.slice(1, -1);
}
