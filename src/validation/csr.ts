import { createHash, createPublicKey, verify, type KeyObject } from 'node:crypto';
import { CertdeskError } from '../core/index.js';
import { DerError, TAG, children, expectTag, oidText, readTlv, stringText, type Tlv } from '../core/der.js';
import { decodeCsrText, requestedSanExtension } from '../core/pem.js';

/** `KeyEncryptionAlgorithm` of spec 2.5; certdesk-specific names for the keys the spec does not list. */
export type KeyAlgorithm = 'RSA' | 'ECC' | 'DSA' | 'Ed25519' | 'Ed448' | 'UNKNOWN';

/** Everything certdesk needs from a PKCS#10 request whose self-signature has been verified. */
export interface CsrInfo {
  /** The request as decoded from the input (what HashMD5/HashSHA256 cover). */
  der: Uint8Array;
  commonName: string;
  organization: string;
  organizationUnit: string;
  locality: string;
  state: string;
  country: string;
  /** Subject emailAddress, else the first rfc822Name SAN, else ''. */
  email: string;
  /** SAN dNSName entries, lower-cased, in request order. */
  dnsNames: string[];
  ipAddresses: string[];
  /** OpenSSL's name of the signature algorithm, e.g. `sha256WithRSAEncryption`. */
  signatureAlgorithm: string;
  keyAlgorithm: KeyAlgorithm;
  /** Bits: RSA modulus, EC field size (521 for P-521), DSA p; 256 for Ed25519, 456 for Ed448. */
  keyLength: number;
  /** `P-256`, `P-384`, `P-521`, `P-192`, `P-224`, else OpenSSL's curve name. ECC only. */
  curve?: string;
  rsa?: { modulus: bigint; publicExponent: bigint };
  /** MD5 of `der`, upper-case hex. */
  hashMd5: string;
  /** SHA-256 of `der`, upper-case hex. */
  hashSha256: string;
  /** The SubjectPublicKeyInfo, DER. */
  spkiDer: Uint8Array;
}

/** The `ParsedCSR` member of POST /ValidateCSR (spec 2.5), spellings as the spec has them. */
export type ParsedCsr = ReturnType<typeof toParsedCsr>;

/** Larger inputs are refused before any parsing: a CSR with 250 SANs is about 10 KiB. */
export const MAX_CSR_CHARS = 64 * 1024;
type SubjectField = 'CN' | 'O' | 'OU' | 'L' | 'ST' | 'C' | 'E';
/** Attribute type OIDs of the subject fields (RFC 5280 §4.1.2.4, PKCS#9 emailAddress). */
const SUBJECT_OIDS: Record<string, SubjectField> = {
  '2.5.4.3': 'CN', '2.5.4.10': 'O', '2.5.4.11': 'OU', '2.5.4.7': 'L', '2.5.4.8': 'ST', '2.5.4.6': 'C', '1.2.840.113549.1.9.1': 'E',
};
const RSASSA_PSS = '1.2.840.113549.1.1.10';

/** Signature algorithm OID → OpenSSL's (long) name, node:crypto key type and digest. */
interface SignatureAlgorithm {
  name: string;
  keyType: string;
  hash: string | null;
}
const SIGNATURE_ALGORITHMS = new Map<string, SignatureAlgorithm>([
  ['1.2.840.113549.1.1.4', { name: 'md5WithRSAEncryption', keyType: 'rsa', hash: 'md5' }],
  ['1.2.840.113549.1.1.5', { name: 'sha1WithRSAEncryption', keyType: 'rsa', hash: 'sha1' }],
  ['1.2.840.113549.1.1.14', { name: 'sha224WithRSAEncryption', keyType: 'rsa', hash: 'sha224' }],
  ['1.2.840.113549.1.1.11', { name: 'sha256WithRSAEncryption', keyType: 'rsa', hash: 'sha256' }],
  ['1.2.840.113549.1.1.12', { name: 'sha384WithRSAEncryption', keyType: 'rsa', hash: 'sha384' }],
  ['1.2.840.113549.1.1.13', { name: 'sha512WithRSAEncryption', keyType: 'rsa', hash: 'sha512' }],
  ['1.2.840.10045.4.1', { name: 'ecdsa-with-SHA1', keyType: 'ec', hash: 'sha1' }],
  ['1.2.840.10040.4.3', { name: 'dsaWithSHA1', keyType: 'dsa', hash: 'sha1' }],
  ['1.3.101.112', { name: 'ED25519', keyType: 'ed25519', hash: null }],
  ['1.3.101.113', { name: 'ED448', keyType: 'ed448', hash: null }],
]);
for (const [i, bits] of ['224', '256', '384', '512'].entries()) {
  const nist = '2.16.840.1.101.3.4.3.';
  SIGNATURE_ALGORITHMS.set(`1.2.840.10045.4.3.${i + 1}`, { name: `ecdsa-with-SHA${bits}`, keyType: 'ec', hash: `sha${bits}` });
  SIGNATURE_ALGORITHMS.set(`${nist}${i + 1}`, { name: `dsa_with_SHA${bits}`, keyType: 'dsa', hash: `sha${bits}` });
  SIGNATURE_ALGORITHMS.set(`${nist}${i + 5}`, { name: `dsa_with_SHA3-${bits}`, keyType: 'dsa', hash: `sha3-${bits}` });
  SIGNATURE_ALGORITHMS.set(`${nist}${i + 9}`, { name: `ecdsa_with_SHA3-${bits}`, keyType: 'ec', hash: `sha3-${bits}` });
  SIGNATURE_ALGORITHMS.set(`${nist}${i + 13}`, { name: `RSA-SHA3-${bits}`, keyType: 'rsa', hash: `sha3-${bits}` });
}

/** node:crypto curve name → the name certdesk shows (NIST where there is one) and field bits. */
const CURVES: Record<string, [string, number]> = {
  prime192v1: ['P-192', 192],
  secp224r1: ['P-224', 224],
  prime256v1: ['P-256', 256],
  secp384r1: ['P-384', 384],
  secp521r1: ['P-521', 521],
};

function invalidCsr(message: string, cause?: unknown): CertdeskError {
  return new CertdeskError('invalidCsr', message, { field: 'CSR', cause });
}

/**
 * Parses a PKCS#10 request given as PEM (`CERTIFICATE REQUEST` or `NEW CERTIFICATE REQUEST`
 * label, LF or CRLF, surrounding whitespace allowed) or as a bare base64 body, and verifies its
 * self-signature with node:crypto. Pure: no I/O, no state.
 * Throws `CertdeskError('invalidCsr', <what is wrong>, {field: 'CSR'})` for every input that is
 * not a complete, well-signed request (too large, bad PEM or base64, truncated or trailing data,
 * unsupported algorithms such as RSASSA-PSS, bad signature) and never any other error.
 */
export function parseCsr(pem: string): CsrInfo {
  try {
    return parseVerified(decodePem(pem));
  } catch (e) {
    if (e instanceof CertdeskError) throw e;
    throw invalidCsr('The CSR could not be parsed: it is not a valid PKCS#10 certificate request.', e);
  }
}

/** The spec 2.5 `ParsedCSR` body for a parsed request and its brand's UniqueValue. */
export function toParsedCsr(info: CsrInfo, uniqueValue: string) {
  return {
    CommonName: info.commonName,
    Organization: info.organization,
    OrganizationUnit: info.organizationUnit,
    Locality: info.locality,
    State: info.state,
    Country: info.country,
    Email: info.email,
    SignaturAlgorithm: info.signatureAlgorithm,
    KeyEncryptionAlgorithm: info.keyAlgorithm,
    KeyLength: info.keyLength,
    HashMD5: info.hashMd5,
    HashSHA256: info.hashSha256,
    UniqueValue: uniqueValue,
  };
}

function decodePem(pem: unknown): Uint8Array {
  if (typeof pem !== 'string') throw invalidCsr('The CSR must be a string holding a PEM request.');
  const decoded = decodeCsrText(pem, MAX_CSR_CHARS);
  if ('problem' in decoded) throw invalidCsr(decoded.problem);
  return decoded.der;
}

function parseVerified(der: Uint8Array): CsrInfo {
  // Step 1: the outer structure, read strictly: trailing bytes are refused and the signed
  // bytes are taken exactly as received for the node:crypto check below.
  let outer: Tlv;
  try {
    outer = readTlv(der, 0);
  } catch (e) {
    throw invalidCsr('The CSR is truncated or its DER encoding is damaged.', e);
  }
  if (outer.end !== der.length) throw invalidCsr(`The CSR has ${der.length - outer.end} bytes of trailing data after the request.`);
  let tbs: Tlv;
  let algId: Tlv;
  let signature: Tlv;
  let tbsParts: Tlv[];
  try {
    const parts = children(der, expectTag(outer, TAG.SEQUENCE));
    if (parts.length !== 3) throw new DerError('not three parts');
    tbs = expectTag(parts[0], TAG.SEQUENCE);
    algId = expectTag(parts[1], TAG.SEQUENCE);
    signature = expectTag(parts[2], TAG.BIT_STRING);
    tbsParts = children(der, tbs);
  } catch (e) {
    throw invalidCsr('The data is not a PKCS#10 certificate request (wrong ASN.1 structure).', e);
  }
  const version = tbsParts[0];
  if (version?.tag !== TAG.INTEGER || version.end - version.contentStart !== 1 || der[version.contentStart] !== 0) {
    throw invalidCsr('The CSR has an unsupported version (only PKCS#10 v1 exists).');
  }

  // Step 2: names and key.
  let subject: Record<SubjectField, string>;
  let names: { type: string; value: string }[];
  let spkiDer: Uint8Array;
  let oid: string;
  try {
    const [, name, spki, attributes] = tbsParts;
    subject = subjectFields(der, expectTag(name, TAG.SEQUENCE));
    spkiDer = der.subarray(expectTag(spki, TAG.SEQUENCE).start, spki!.end);
    names = attributes === undefined ? [] : subjectAltNames(der, expectTag(attributes, 0xa0));
    oid = oidText(der, children(der, algId)[0]!);
  } catch (e) {
    throw invalidCsr('The CSR is not a valid PKCS#10 certificate request (its fields do not decode).', e);
  }
  let key: KeyObject;
  try {
    key = createPublicKey({ key: Buffer.from(spkiDer), format: 'der', type: 'spki' });
  } catch (e) {
    throw invalidCsr('The CSR public key is damaged or of an unsupported type.', e);
  }

  // Step 3: proof of possession, verified over the bytes as received.
  const sigAlg = SIGNATURE_ALGORITHMS.get(oid);
  if (oid === RSASSA_PSS) throw invalidCsr('The CSR is signed with RSASSA-PSS, which is not supported: use PKCS#1 v1.5.');
  if (!sigAlg) throw invalidCsr(`The CSR is signed with an unsupported signature algorithm (${oid || 'unreadable'}).`);
  const keyType = key.asymmetricKeyType ?? 'unknown';
  if (sigAlg.keyType !== keyType) {
    throw invalidCsr(`The CSR signature algorithm ${sigAlg.name} does not match its ${keyType} key.`);
  }
  // A BIT STRING's first content byte counts the unused bits; a signature has none.
  const unusedBits = der[signature.contentStart];
  const sigBytes = der.subarray(signature.contentStart + 1, signature.end);
  let valid: boolean;
  try {
    valid = unusedBits === 0 && verify(sigAlg.hash, der.subarray(tbs.start, tbs.end), key, sigBytes);
  } catch {
    valid = false;
  }
  if (!valid) throw invalidCsr('The CSR signature is invalid: the request was altered or not signed with its own key.');

  // Step 4: the facts certdesk works with.
  return {
    der,
    commonName: subject.CN,
    organization: subject.O,
    organizationUnit: subject.OU,
    locality: subject.L,
    state: subject.ST,
    country: subject.C,
    email: subject.E || (names.find((n) => n.type === 'email')?.value ?? ''),
    dnsNames: names.filter((n) => n.type === 'dns').map((n) => n.value.toLowerCase()),
    ipAddresses: names.filter((n) => n.type === 'ip').map((n) => n.value),
    signatureAlgorithm: sigAlg.name,
    ...describeKey(key),
    hashMd5: createHash('md5').update(der).digest('hex').toUpperCase(),
    hashSha256: createHash('sha256').update(der).digest('hex').toUpperCase(),
    spkiDer,
  };
}

type KeyFacts = Pick<CsrInfo, 'keyAlgorithm' | 'keyLength' | 'curve' | 'rsa'>;

function describeKey(key: KeyObject): KeyFacts {
  const details = key.asymmetricKeyDetails ?? {};
  switch (key.asymmetricKeyType) {
    case 'rsa': {
      const [modulus, publicExponent] = rsaNumbers(key);
      return { keyAlgorithm: 'RSA', keyLength: details.modulusLength ?? 0, rsa: { modulus, publicExponent } };
    }
    case 'ec': {
      const name = details.namedCurve ?? '';
      const [curve, bits] = CURVES[name] ?? [name, Number(/\d{3}/.exec(name)?.[0] ?? 0)];
      return { keyAlgorithm: 'ECC', keyLength: bits, ...(curve ? { curve } : {}) };
    }
    case 'dsa':
      return { keyAlgorithm: 'DSA', keyLength: details.modulusLength ?? 0 };
    case 'ed25519':
      return { keyAlgorithm: 'Ed25519', keyLength: 256 };
    case 'ed448':
      return { keyAlgorithm: 'Ed448', keyLength: 456 };
    default:
      return { keyAlgorithm: 'UNKNOWN', keyLength: 0 };
  }
}

function rsaNumbers(key: KeyObject): [bigint, bigint] {
  const jwk = key.export({ format: 'jwk' });
  const toBigInt = (b64url: string | undefined): bigint => BigInt(`0x${Buffer.from(b64url ?? '', 'base64url').toString('hex')}`);
  return [toBigInt(jwk.n), toBigInt(jwk.e)];
}

/** The first value of each subject field (Name: SEQUENCE OF SET OF {type, value}). */
function subjectFields(der: Uint8Array, name: Tlv): Record<SubjectField, string> {
  const out = { CN: '', O: '', OU: '', L: '', ST: '', C: '', E: '' };
  for (const rdn of children(der, name)) {
    for (const atv of children(der, expectTag(rdn, TAG.SET))) {
      const [type, value] = children(der, expectTag(atv, TAG.SEQUENCE));
      if (type === undefined || value === undefined) throw new DerError('bad subject attribute');
      const field = SUBJECT_OIDS[oidText(der, type)];
      if (field !== undefined && out[field] === '') out[field] = stringText(der, value) ?? '';
    }
  }
  return out;
}

/** SAN entries from the extensionRequest attribute ([0] IMPLICIT SET OF Attribute). */
function subjectAltNames(der: Uint8Array, attributes: Tlv): { type: string; value: string }[] {
  const octets = requestedSanExtension(der, attributes);
  return octets === undefined ? [] : generalNames(der, octets);
}

/** GeneralNames (RFC 5280 §4.2.1.6): rfc822Name [1], dNSName [2], iPAddress [7]; others skipped. */
function generalNames(der: Uint8Array, octets: Tlv): { type: string; value: string }[] {
  const list = readTlv(der, octets.contentStart, octets.end);
  if (list.end !== octets.end) throw new DerError('trailing bytes in the SAN extension');
  const out: { type: string; value: string }[] = [];
  for (const item of children(der, expectTag(list, TAG.SEQUENCE))) {
    const bytes = der.subarray(item.contentStart, item.end);
    if (item.tag === 0x81 || item.tag === 0x82) out.push({ type: item.tag === 0x81 ? 'email' : 'dns', value: Buffer.from(bytes).toString('latin1') });
    else if (item.tag === 0x87) out.push({ type: 'ip', value: ipText(bytes) });
  }
  return out;
}

function ipText(bytes: Uint8Array): string {
  if (bytes.length === 4) return [...bytes].join('.');
  if (bytes.length !== 16) throw new Error('bad iPAddress length');
  const groups = [...Array(8).keys()].map((i) => ((bytes[2 * i]! << 8) | bytes[2 * i + 1]!).toString(16));
  // The URL parser writes IPv6 in the RFC 5952 canonical (compressed) form.
  return new URL(`http://[${groups.join(':')}]`).hostname.slice(1, -1);
}
