/**
 * SubjectPublicKeyInfo (RFC 5280 §4.1) and the RSAPublicKey inside it (RFC 8017 §A.1.1), read
 * strictly with core/der: the structure only, no policy. The CSR reader (csr.ts) and the CA's key
 * policy (src/ca/key-policy.ts) both read keys here, so a key is decoded by one piece of code.
 */
import { DerError, TAG, children, contents, expectTag, oidText, readTlv, type Tlv } from './der.js';

export const RSA_ENCRYPTION_OID = '1.2.840.113549.1.1.1';
export const EC_PUBLIC_KEY_OID = '1.2.840.10045.2.1';

/** A SubjectPublicKeyInfo as read by readSpki; offsets in `params` refer to `der`. */
export interface ParsedSpki {
  /** The SubjectPublicKeyInfo DER; the caller's buffer, which it must not change afterwards. */
  readonly der: Uint8Array;
  /** The key algorithm OID, dotted. */
  readonly oid: string;
  /** The AlgorithmIdentifier parameters, when present. */
  readonly params: Tlv | undefined;
  /** The subjectPublicKey BIT STRING's value, without the unused-bits byte. */
  readonly key: Uint8Array;
}

/**
 * Reads a SubjectPublicKeyInfo: exactly {AlgorithmIdentifier, BIT STRING}, the algorithm with at
 * most one parameter, no unused bits, no trailing bytes. Throws DerError on anything else.
 */
export function readSpki(der: Uint8Array): ParsedSpki {
  const outer = readTlv(der, 0);
  if (outer.end !== der.length) throw new DerError('trailing bytes');
  const [alg, bits, extra] = children(der, expectTag(outer, TAG.SEQUENCE));
  if (extra !== undefined) throw new DerError('extra SubjectPublicKeyInfo member');
  const algParts = children(der, expectTag(alg, TAG.SEQUENCE));
  if (algParts.length > 2) throw new DerError('extra AlgorithmIdentifier member');
  const bitString = expectTag(bits, TAG.BIT_STRING);
  if (bitString.end === bitString.contentStart || der[bitString.contentStart] !== 0)
    throw new DerError('bad BIT STRING');
  return {
    der,
    oid: oidText(der, algParts[0]!),
    params: algParts[1],
    key: der.subarray(bitString.contentStart + 1, bitString.end),
  };
}

/** True for an ASN.1 NULL (as AlgorithmIdentifier parameters). */
export function isNull(tlv: Tlv): boolean {
  return tlv.tag === TAG.NULL && tlv.end === tlv.contentStart;
}

/**
 * The modulus and public exponent of an RSA key (the RSAPublicKey in `spki.key`), as big-endian
 * magnitudes without a sign byte. Refuses negative, zero and non-minimal INTEGERs and trailing
 * bytes with DerError. The algorithm OID is not checked here.
 */
export function rsaPublicNumbers(spki: ParsedSpki): { modulus: Uint8Array; exponent: Uint8Array } {
  const seq = readTlv(spki.key, 0);
  if (seq.end !== spki.key.length) throw new DerError('trailing bytes');
  const [n, e, extra] = children(spki.key, expectTag(seq, TAG.SEQUENCE));
  if (extra !== undefined) throw new DerError('extra RSAPublicKey member');
  return { modulus: positiveInteger(spki.key, n), exponent: positiveInteger(spki.key, e) };
}

/** An INTEGER's magnitude; refuses negative and non-minimal encodings. */
function positiveInteger(der: Uint8Array, tlv: Tlv | undefined): Uint8Array {
  const bytes = contents(der, expectTag(tlv, TAG.INTEGER));
  if (bytes.length === 0 || bytes[0]! & 0x80) throw new DerError('INTEGER not positive');
  if (bytes[0] === 0) {
    if (bytes.length === 1) throw new DerError('INTEGER is zero');
    if ((bytes[1]! & 0x80) === 0) throw new DerError('non-minimal INTEGER');
    return bytes.subarray(1);
  }
  return bytes;
}
