/**
 * Proof of possession for a request read by readCsr (csr.ts): the self-signature verified with
 * node:crypto over the bytes as received, and the key described. A VerifiedCsr is what an order
 * carries from its checks to the CA: src/ca/checks.ts accepts one without reading or verifying the
 * request again, and re-reads with readCsr whatever else it is given.
 */
import { createPublicKey, verify, type JsonWebKey, type KeyObject } from 'node:crypto';
import { invalidCsr, isReadCsr, readCsr, type CsrRequest } from './csr.js';
import { TAG, oidText } from './der.js';
import { CertdeskError } from './errors.js';
import { EC_PUBLIC_KEY_OID, RSA_ENCRYPTION_OID, rsaPublicNumbers, type ParsedSpki } from './spki.js';

/** `KeyEncryptionAlgorithm` of spec 2.5; certdesk-specific names for the keys the spec does not list. */
export type KeyAlgorithm = 'RSA' | 'ECC' | 'DSA' | 'Ed25519' | 'Ed448' | 'UNKNOWN';

declare const verified: unique symbol;

/** A request whose self-signature verified. Only verifyCsr makes one (see isVerifiedCsr). */
export interface VerifiedCsr extends CsrRequest {
  readonly [verified]: true;
  /** OpenSSL's name of the signature algorithm, e.g. `sha256WithRSAEncryption`. */
  readonly signatureAlgorithm: string;
  readonly keyAlgorithm: KeyAlgorithm;
  /** Bits: RSA modulus, EC field size (521 for P-521), DSA p; 256 for Ed25519, 456 for Ed448. */
  readonly keyLength: number;
  /** `P-256`, `P-384`, `P-521`, `P-192`, `P-224`, else OpenSSL's curve name. ECC only. */
  readonly curve?: string;
  readonly rsa?: { readonly modulus: bigint; readonly publicExponent: bigint };
}

/** A signature algorithm: OpenSSL's (long) name, node:crypto key type and digest. */
export interface SignatureAlgorithm {
  readonly name: string;
  readonly keyType: string;
  readonly hash: string | null;
}
const RSASSA_PSS = '1.2.840.113549.1.1.10';
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
  SIGNATURE_ALGORITHMS.set(`1.2.840.10045.4.3.${i + 1}`, {
    name: `ecdsa-with-SHA${bits}`,
    keyType: 'ec',
    hash: `sha${bits}`,
  });
  SIGNATURE_ALGORITHMS.set(`${nist}${i + 1}`, { name: `dsa_with_SHA${bits}`, keyType: 'dsa', hash: `sha${bits}` });
  SIGNATURE_ALGORITHMS.set(`${nist}${i + 5}`, { name: `dsa_with_SHA3-${bits}`, keyType: 'dsa', hash: `sha3-${bits}` });
  SIGNATURE_ALGORITHMS.set(`${nist}${i + 9}`, { name: `ecdsa_with_SHA3-${bits}`, keyType: 'ec', hash: `sha3-${bits}` });
  SIGNATURE_ALGORITHMS.set(`${nist}${i + 13}`, { name: `RSA-SHA3-${bits}`, keyType: 'rsa', hash: `sha3-${bits}` });
}
const KEY_TYPE_NAMES: Record<string, string> = {
  rsa: 'RSA',
  ec: 'ECDSA',
  dsa: 'DSA',
  ed25519: 'Ed25519',
  ed448: 'Ed448',
  'rsa-pss': 'RSASSA-PSS',
};

/** The signature algorithms verifyCsr can verify, by OID; undefined for the others. */
export function signatureAlgorithm(oid: string): SignatureAlgorithm | undefined {
  return SIGNATURE_ALGORITHMS.get(oid);
}

/** A name for a signature algorithm OID in messages: OpenSSL's, `RSASSA-PSS`, else the OID. */
export function signatureAlgorithmName(oid: string): string {
  return oid === RSASSA_PSS ? 'RSASSA-PSS' : (SIGNATURE_ALGORITHMS.get(oid)?.name ?? oid);
}

/** node:crypto curve name → the name certdesk shows (NIST where there is one) and field bits. */
const CURVES: Record<string, [string, number]> = {
  prime192v1: ['P-192', 192],
  secp224r1: ['P-224', 224],
  prime256v1: ['P-256', 256],
  secp384r1: ['P-384', 384],
  secp521r1: ['P-521', 521],
};
/** Named curves (OID → JWK crv, coordinate bytes) whose keys load from a JWK: ~75 µs for EC, ~8 µs for RSA, where OpenSSL's SPKI decoder takes ~120 µs. */
const JWK_CURVES: Record<string, [string, number]> = {
  '1.2.840.10045.3.1.7': ['P-256', 32],
  '1.3.132.0.34': ['P-384', 48],
  '1.3.132.0.35': ['P-521', 66],
};

const VERIFIED = new WeakSet<object>();

/** True only for a result of verifyCsr in this process (a copy or an imitation is not one). */
export function isVerifiedCsr(value: unknown): value is VerifiedCsr {
  return typeof value === 'object' && value !== null && VERIFIED.has(value);
}

/**
 * Verifies the self-signature of a request read by readCsr over the bytes as received and
 * describes its key (an object readCsr did not return is read from its `der` first). Refuses RSASSA-PSS, algorithms node:crypto cannot verify, an algorithm that
 * does not fit the key, and a signature that does not verify. Returns a frozen VerifiedCsr.
 * Throws `CertdeskError('invalidCsr', …, {field: 'CSR'})`, and never anything else.
 */
export function verifyCsr(given: CsrRequest): VerifiedCsr {
  try {
    // Only the reader's own results are taken as read; anything else is read from its bytes.
    const request = isReadCsr(given) ? given : readCsr(given.der);
    let key: KeyObject;
    try {
      key = loadKey(request.publicKey);
    } catch (e) {
      throw invalidCsr('The CSR public key is damaged or of an unsupported type.', e);
    }
    const oid = request.signatureOid;
    if (oid === RSASSA_PSS)
      throw invalidCsr('The CSR is signed with RSASSA-PSS, which is not accepted: use PKCS#1 v1.5.');
    const algorithm = SIGNATURE_ALGORITHMS.get(oid);
    if (algorithm === undefined)
      throw invalidCsr(`The CSR is signed with an unsupported signature algorithm (${oid}).`);
    const keyType = key.asymmetricKeyType ?? 'unknown';
    if (algorithm.keyType !== keyType) {
      throw invalidCsr(
        `The CSR signature algorithm ${algorithm.name} does not match its ${KEY_TYPE_NAMES[keyType] ?? keyType} key.`,
      );
    }
    let valid: boolean;
    try {
      valid = verify(algorithm.hash, request.signed, key, request.signature);
    } catch {
      valid = false;
    }
    if (!valid) {
      throw invalidCsr(
        "The CSR signature does not verify: the request was altered, or the signature is invalid or not made with the request's own key.",
      );
    }
    const result = Object.freeze({
      ...request,
      signatureAlgorithm: algorithm.name,
      ...describeKey(key),
    }) as VerifiedCsr;
    VERIFIED.add(result);
    return result;
  } catch (e) {
    if (e instanceof CertdeskError) throw e;
    throw invalidCsr('The CSR could not be verified: it is not a valid PKCS#10 certificate request.', e);
  }
}

/** The request's own key. Throws on a key node:crypto cannot load. */
function loadKey(spki: ParsedSpki): KeyObject {
  const jwk = jwkOf(spki);
  if (jwk !== undefined) return createPublicKey({ key: jwk, format: 'jwk' });
  return createPublicKey({ key: Buffer.from(spki.der), format: 'der', type: 'spki' });
}

/** The JWK of an RSA key or of an uncompressed point on a JWK curve, from the bytes already read; else undefined. */
function jwkOf(spki: ParsedSpki): JsonWebKey | undefined {
  const b64 = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('base64url');
  try {
    if (spki.oid === RSA_ENCRYPTION_OID) {
      const { modulus, exponent } = rsaPublicNumbers(spki);
      return { kty: 'RSA', n: b64(modulus), e: b64(exponent) };
    }
    if (spki.oid === EC_PUBLIC_KEY_OID && spki.params?.tag === TAG.OID) {
      const curve = JWK_CURVES[oidText(spki.der, spki.params)];
      if (curve === undefined) return undefined;
      const [crv, size] = curve;
      if (spki.key.length !== 2 * size + 1 || spki.key[0] !== 4) return undefined;
      return { kty: 'EC', crv, x: b64(spki.key.subarray(1, 1 + size)), y: b64(spki.key.subarray(1 + size)) };
    }
  } catch {
    // Not strict DER: OpenSSL's decoder has the last word.
  }
  return undefined;
}

type KeyFacts = Pick<VerifiedCsr, 'keyAlgorithm' | 'keyLength' | 'curve' | 'rsa'>;

function describeKey(key: KeyObject): KeyFacts {
  const details = key.asymmetricKeyDetails ?? {};
  switch (key.asymmetricKeyType) {
    case 'rsa': {
      const jwk = key.export({ format: 'jwk' });
      const toBigInt = (b64url: string | undefined): bigint =>
        BigInt(`0x${Buffer.from(b64url ?? '', 'base64url').toString('hex') || '0'}`);
      return {
        keyAlgorithm: 'RSA',
        keyLength: details.modulusLength ?? 0,
        rsa: Object.freeze({ modulus: toBigInt(jwk.n), publicExponent: toBigInt(jwk.e) }),
      };
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
