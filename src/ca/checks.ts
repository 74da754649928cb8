/**
 * The CA's own gate on what it certifies: a PKCS#10 request is parsed strictly, its key must pass
 * the Baseline Requirements' key checks (BR §6.1.5, §6.1.6; Boulder's goodkey), and only then is
 * its self-signature verified. The CA never trusts an earlier parse (src/validation/ is not
 * imported here): the only way to obtain a CheckedCsr is checkCsr.
 */
import { createPublicKey, verify, type JsonWebKey, type KeyObject } from 'node:crypto';
import { CertdeskError } from '../core/index.js';
import { DerError, TAG, children, contents, expectTag, oidText, readTlv, stringText, type Tlv } from '../core/der.js';
import { decodeCsrText, requestedSanExtension } from '../core/pem.js';
import { assessKey, badKey, isNull, parseSpki, type CaKeyType, type CheckedKey, type ParsedSpki } from './key-policy.js';

export { checkPublicKey, type CaKeyType, type CheckedKey } from './key-policy.js';

declare const checked: unique symbol;

/** A PKCS#10 request whose self-signature verified and whose key passed checkPublicKey. Only checkCsr makes one. */
export interface CheckedCsr {
  readonly [checked]: true;
  readonly der: Uint8Array;
  readonly key: CheckedKey;
  /** Subject commonName ('' when absent) and SAN dNSNames (lower-cased, request order) — informational. */
  readonly commonName: string;
  readonly dnsNames: readonly string[];
}

/** Larger inputs are refused before parsing; a request with 250 SANs is about 10 KiB. */
const MAX_INPUT = 64 * 1024;
const CN_OID = '2.5.4.3';

interface SignatureAlgorithm {
  readonly name: string;
  readonly keyType: CaKeyType;
  readonly hash: string;
}
const SIGNATURE_ALGORITHMS: Record<string, SignatureAlgorithm> = {
  '1.2.840.113549.1.1.11': { name: 'sha256WithRSAEncryption', keyType: 'rsa', hash: 'sha256' },
  '1.2.840.113549.1.1.12': { name: 'sha384WithRSAEncryption', keyType: 'rsa', hash: 'sha384' },
  '1.2.840.113549.1.1.13': { name: 'sha512WithRSAEncryption', keyType: 'rsa', hash: 'sha512' },
  '1.2.840.10045.4.3.2': { name: 'ecdsa-with-SHA256', keyType: 'ecdsa', hash: 'sha256' },
  '1.2.840.10045.4.3.3': { name: 'ecdsa-with-SHA384', keyType: 'ecdsa', hash: 'sha384' },
  '1.2.840.10045.4.3.4': { name: 'ecdsa-with-SHA512', keyType: 'ecdsa', hash: 'sha512' },
};
const SHA1_SIGNATURES: Record<string, string> = {
  '1.2.840.113549.1.1.5': 'sha1WithRSAEncryption',
  '1.2.840.10045.4.1': 'ecdsa-with-SHA1',
  '1.2.840.10040.4.3': 'dsaWithSHA1',
};
/** Names of other signature algorithms, only for a clearer refusal. */
const OTHER_SIGNATURES: Record<string, string> = {
  '1.2.840.113549.1.1.4': 'md5WithRSAEncryption',
  '1.2.840.113549.1.1.14': 'sha224WithRSAEncryption',
  '1.2.840.113549.1.1.10': 'RSASSA-PSS',
  '1.2.840.10045.4.3.1': 'ecdsa-with-SHA224',
  '1.3.101.112': 'Ed25519',
  '1.3.101.113': 'Ed448',
};

function invalidCsr(message: string, cause?: unknown): CertdeskError {
  return new CertdeskError('invalidCsr', message, { field: 'CSR', cause });
}

/**
 * Parses a PKCS#10 request (DER bytes, or PEM text labelled CERTIFICATE REQUEST or NEW
 * CERTIFICATE REQUEST; a bare base64 body is also read — text is decoded by decodeCsrText of
 * src/core/pem.ts, as in src/validation/csr.ts), checks its key with the rules of checkPublicKey
 * and then verifies its self-signature.
 * Throws `CertdeskError` of kind `invalidCsr` (unparsable, unsupported signature algorithm,
 * signature that does not verify) or `badKey`, with field 'CSR', and never anything else.
 */
export function checkCsr(input: Uint8Array | string): CheckedCsr {
  try {
    const der = decodeInput(input);
    const request = parseRequest(der);
    let spki: ParsedSpki;
    try {
      spki = parseSpki(der.slice(request.spki.start, request.spki.end));
    } catch (e) {
      throw invalidCsr('The CSR could not be parsed: its public key is not a valid SubjectPublicKeyInfo.', e);
    }
    // Key policy before the signature, so a weak key is reported as such even in a good request.
    const { key, jwk } = assessKey(spki);
    verifySignature(der, request, key, jwk);
    const result = { der, key, commonName: request.commonName, dnsNames: Object.freeze(request.dnsNames) };
    return Object.freeze(result) as unknown as CheckedCsr;
  } catch (e) {
    if (e instanceof CertdeskError) throw e;
    throw invalidCsr('The CSR could not be parsed: it is not a valid PKCS#10 certificate request.', e);
  }
}

// ---- Input and request structure ----

/** A private copy of the DER, so later changes to the caller's buffer cannot alter a checked request. */
function decodeInput(input: unknown): Uint8Array {
  if (input instanceof Uint8Array) {
    if (input.length === 0) throw invalidCsr('The CSR is empty.');
    if (input.length > MAX_INPUT) throw invalidCsr(`The CSR is larger than ${MAX_INPUT / 1024} KiB.`);
    return new Uint8Array(input);
  }
  if (typeof input !== 'string') throw invalidCsr('The CSR could not be parsed: it must be DER bytes or PEM text.');
  const decoded = decodeCsrText(input, MAX_INPUT);
  if ('problem' in decoded) throw invalidCsr(decoded.problem);
  return decoded.der;
}

interface ParsedRequest {
  readonly cri: Tlv;
  readonly spki: Tlv;
  readonly sigOid: string;
  readonly sigParams: Tlv | undefined;
  readonly signature: Uint8Array;
  readonly commonName: string;
  readonly dnsNames: string[];
}

/** CertificationRequest (RFC 2986 §4) read strictly; every DER fault is an invalidCsr. */
function parseRequest(der: Uint8Array): ParsedRequest {
  let outer: Tlv;
  try {
    outer = readTlv(der, 0);
  } catch (e) {
    throw invalidCsr('The CSR could not be parsed: its DER encoding is truncated or damaged.', e);
  }
  if (outer.end !== der.length) throw invalidCsr(`The CSR could not be parsed: it has ${der.length - outer.end} bytes of trailing data.`);
  let parts: Tlv[];
  let criParts: Tlv[];
  try {
    parts = children(der, expectTag(outer, TAG.SEQUENCE));
    if (parts.length !== 3) throw new DerError('not three parts');
    expectTag(parts[1], TAG.SEQUENCE);
    expectTag(parts[2], TAG.BIT_STRING);
    criParts = children(der, expectTag(parts[0], TAG.SEQUENCE));
    const version = expectTag(criParts[0], TAG.INTEGER);
    if (version.end - version.contentStart !== 1 || der[version.contentStart] !== 0) throw new DerError('not version 1');
    // The attributes are mandatory in RFC 2986 but some clients omit an empty set.
    if (criParts.length !== 3 && criParts.length !== 4) throw new DerError('bad CertificationRequestInfo');
  } catch (e) {
    throw invalidCsr('The CSR could not be parsed: it is not a PKCS#10 certificate request.', e);
  }
  try {
    const [cri, algId, sig] = parts as [Tlv, Tlv, Tlv];
    const [, subject, spki, attributes] = criParts as [Tlv, Tlv, Tlv, Tlv | undefined];
    const algParts = children(der, algId);
    const sigOid = oidText(der, algParts[0]!);
    if (algParts.length > 2) throw new DerError('extra AlgorithmIdentifier member');
    if (sig.end - sig.contentStart < 2 || der[sig.contentStart] !== 0) throw new DerError('bad signature BIT STRING');
    return {
      cri,
      spki: expectTag(spki, TAG.SEQUENCE),
      sigOid,
      sigParams: algParts[1],
      signature: der.subarray(sig.contentStart + 1, sig.end),
      commonName: commonName(der, expectTag(subject, TAG.SEQUENCE)),
      dnsNames: attributes === undefined ? [] : dnsNames(der, expectTag(attributes, 0xa0)),
    };
  } catch (e) {
    throw invalidCsr('The CSR could not be parsed: its fields do not decode.', e);
  }
}

function commonName(der: Uint8Array, name: Tlv): string {
  let cn: string | undefined;
  for (const rdn of children(der, name)) {
    for (const atv of children(der, expectTag(rdn, TAG.SET))) {
      const [type, value, extra] = children(der, expectTag(atv, TAG.SEQUENCE));
      if (type === undefined || value === undefined || extra !== undefined) throw new DerError('bad subject attribute');
      if (oidText(der, type) === CN_OID && cn === undefined) cn = stringText(der, value) ?? '';
    }
  }
  return cn ?? '';
}

/** dNSName entries of the SAN in the extensionRequest attribute, lower-cased. */
function dnsNames(der: Uint8Array, attributes: Tlv): string[] {
  const octets = requestedSanExtension(der, attributes);
  if (octets === undefined) return [];
  const list = readTlv(der, octets.contentStart, octets.end);
  if (list.end !== octets.end) throw new DerError('trailing bytes in the SAN extension');
  const out: string[] = [];
  for (const item of children(der, expectTag(list, TAG.SEQUENCE))) {
    if (item.tag === 0x82) out.push(Buffer.from(contents(der, item)).toString('latin1').toLowerCase());
  }
  return out;
}

function verifySignature(der: Uint8Array, request: ParsedRequest, key: CheckedKey, jwk: JsonWebKey): void {
  const algorithm = SIGNATURE_ALGORITHMS[request.sigOid];
  if (algorithm === undefined) {
    const sha1 = SHA1_SIGNATURES[request.sigOid];
    if (sha1 !== undefined) throw invalidCsr(`The CSR is signed with ${sha1}: SHA-1 signatures are not accepted; sign it with SHA-256.`);
    const name = OTHER_SIGNATURES[request.sigOid] ?? request.sigOid;
    throw invalidCsr(`The CSR is signed with ${name}, which is not accepted: use sha256WithRSAEncryption or ecdsa-with-SHA256 (or SHA-384/512).`);
  }
  // RSA signature parameters are NULL, ECDSA's absent (RFC 4055, 5758); NULL is tolerated for both.
  if (request.sigParams !== undefined && !isNull(request.sigParams)) {
    throw invalidCsr(`The CSR could not be parsed: its ${algorithm.name} signature algorithm has unexpected parameters.`);
  }
  if (algorithm.keyType !== key.type) {
    throw invalidCsr(`The CSR signature algorithm ${algorithm.name} does not match its ${key.type === 'rsa' ? 'RSA' : 'ECDSA'} key.`);
  }
  // From the numbers already parsed and checked: OpenSSL's SPKI decoder costs ~100 µs per
  // key, a JWK import ~8 µs (RSA) to ~65 µs (EC). Same key, and the SPKI bytes were checked above.
  let publicKey: KeyObject;
  try {
    publicKey = createPublicKey({ key: jwk, format: 'jwk' });
  } catch (e) {
    throw badKey('The public key could not be loaded by the crypto library.', e);
  }
  let valid: boolean;
  try {
    valid = verify(algorithm.hash, der.subarray(request.cri.start, request.cri.end), publicKey, request.signature);
  } catch {
    valid = false;
  }
  if (!valid) throw invalidCsr('The CSR signature does not verify: the request was altered or not signed with its own key.');
}
