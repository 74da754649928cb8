import { ECDH, createHash } from 'node:crypto';
import { CertdeskError } from '../core/index.js';
import { TAG, oidText } from '../core/der.js';
import {
  EC_PUBLIC_KEY_OID,
  RSA_ENCRYPTION_OID,
  isNull,
  readSpki,
  rsaPublicNumbers,
  type ParsedSpki,
} from '../core/spki.js';

// The CA's key policy (BR §6.1.5–6.1.6): which public keys it certifies, and why not the others.
// Every refusal is a CertdeskError('badKey') with a message of its own.

export type CaKeyType = 'rsa' | 'ecdsa';

export interface CheckedKey {
  /** SubjectPublicKeyInfo DER, exactly as given (a private copy). */
  readonly spki: Uint8Array;
  readonly type: CaKeyType;
  /** RSA modulus bits, or 256/384 for the curves. */
  readonly bits: number;
  readonly curve?: 'P-256' | 'P-384';
  /** RFC 5280 §4.2.1.2 method (1): SHA-1 of the subjectPublicKey BIT STRING's value (without the unused-bits byte). */
  readonly keyId: Uint8Array;
}

const MIN_RSA_BITS = 2048;
const MAX_RSA_BITS = 8192;
const FERMAT_ROUNDS = 100;
const MAX_EXPONENT = (1n << 256n) - 1n;
const USE_INSTEAD = 'use RSA (2048 bits or more) or ECDSA P-256/P-384';

/** Key algorithm OIDs the CA refuses, by name for the message. */
const OTHER_KEY_TYPES: Record<string, string> = {
  '1.2.840.10040.4.1': 'DSA',
  '1.2.840.10046.2.1': 'DH',
  '1.2.840.113549.1.3.1': 'DH',
  '1.3.101.110': 'X25519',
  '1.3.101.111': 'X448',
  '1.3.101.112': 'Ed25519',
  '1.3.101.113': 'Ed448',
  '1.2.840.113549.1.1.10': 'RSASSA-PSS',
  '1.2.840.113549.1.1.7': 'RSAES-OAEP',
  '1.3.132.1.12': 'ECDH',
  '1.3.132.1.13': 'ECMQV',
  '1.2.156.10197.1.301': 'SM2',
};

interface Curve {
  readonly name: 'P-256' | 'P-384';
  /** OpenSSL's name, for ECDH.convertKey. */
  readonly openssl: string;
  readonly bits: number;
  /** The field prime, big-endian: point coordinates must be below it. */
  readonly p: Buffer;
}
const CURVES: Record<string, Curve> = {
  '1.2.840.10045.3.1.7': {
    name: 'P-256',
    openssl: 'prime256v1',
    bits: 256,
    p: Buffer.from('ffffffff00000001000000000000000000000000ffffffffffffffffffffffff', 'hex'),
  },
  '1.3.132.0.34': {
    name: 'P-384',
    openssl: 'secp384r1',
    bits: 384,
    p: Buffer.from(
      'fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffeffffffff0000000000000000ffffffff',
      'hex',
    ),
  },
};
/** Curves the CA refuses, by name for the message. */
const OTHER_CURVES: Record<string, string> = {
  '1.2.840.10045.3.1.1': 'P-192',
  '1.3.132.0.33': 'P-224',
  '1.3.132.0.35': 'P-521',
  '1.3.132.0.10': 'secp256k1',
  '1.3.132.0.31': 'secp192k1',
  '1.3.132.0.32': 'secp224k1',
  '1.2.840.10045.3.1.4': 'prime239v1',
  '1.2.840.10045.3.1.5': 'prime239v2',
  '1.2.840.10045.3.1.6': 'prime239v3',
  '1.3.36.3.3.2.8.1.1.1': 'brainpoolP160r1',
  '1.3.36.3.3.2.8.1.1.3': 'brainpoolP192r1',
  '1.3.36.3.3.2.8.1.1.5': 'brainpoolP224r1',
  '1.3.36.3.3.2.8.1.1.7': 'brainpoolP256r1',
  '1.3.36.3.3.2.8.1.1.9': 'brainpoolP320r1',
  '1.3.36.3.3.2.8.1.1.11': 'brainpoolP384r1',
  '1.3.36.3.3.2.8.1.1.13': 'brainpoolP512r1',
  '1.2.156.10197.1.301': 'SM2',
};

/** Primes below 1000 (BR §6.1.6 asks for no small factors; Boulder uses the same bound). */
const SMALL_PRIMES: readonly number[] = (() => {
  const composite = new Uint8Array(1000);
  const out: number[] = [];
  for (let i = 2; i < 1000; i++) {
    if (composite[i]) continue;
    out.push(i);
    for (let j = i * i; j < 1000; j += i) composite[j] = 1;
  }
  return out;
})();

/**
 * SMALL_PRIMES in groups whose product stays below 2^53: one bigint remainder per group (34 of
 * them), then plain Number arithmetic, instead of 168 bigint divisions.
 */
const PRIME_CHUNKS: readonly { readonly product: bigint; readonly primes: readonly number[] }[] = (() => {
  const out: { product: bigint; primes: number[] }[] = [];
  let primes: number[] = [];
  let product = 1;
  for (const p of SMALL_PRIMES) {
    if (product * p > Number.MAX_SAFE_INTEGER) {
      out.push({ product: BigInt(product), primes });
      primes = [];
      product = 1;
    }
    primes.push(p);
    product *= p;
  }
  out.push({ product: BigInt(product), primes });
  return out;
})();

/** Quadratic residues mod 256, 63, 65 and 11 (GMP's filter): most non-squares fail one of them cheaply. */
function residues(m: number): Uint8Array {
  const table = new Uint8Array(m);
  for (let i = 0; i < m; i++) table[(i * i) % m] = 1;
  return table;
}
const SQUARES_256 = residues(256);
const SQUARES_63 = residues(63);
const SQUARES_65 = residues(65);
const SQUARES_11 = residues(11);
const M_63_65_11 = BigInt(63 * 65 * 11);

export function badKey(message: string, cause?: unknown): CertdeskError {
  return new CertdeskError('badKey', message, { field: 'CSR', cause });
}

/**
 * Checks a SubjectPublicKeyInfo (DER) against the CA's key policy: RSA of 2048–8192 bits
 * (a multiple of 8) with 65537 ≤ e < 2^256 odd, no prime factor below 1000 and not Fermat-
 * factorable in 100 rounds; or ECDSA on P-256/P-384 with a valid uncompressed point.
 * Throws `CertdeskError('badKey', …, {field: 'CSR'})`, and never anything else.
 */
export function checkPublicKey(spki: Uint8Array): CheckedKey {
  try {
    let parsed: ParsedSpki;
    try {
      parsed = readSpki(new Uint8Array(spki));
    } catch (e) {
      throw badKey('The public key could not be parsed: it is not a valid SubjectPublicKeyInfo.', e);
    }
    return assessKey(parsed);
  } catch (e) {
    if (e instanceof CertdeskError) throw e;
    throw badKey('The public key could not be parsed: it is not a valid SubjectPublicKeyInfo.', e);
  }
}

/**
 * The policy of checkPublicKey applied to a key read by core's readSpki (whose `der` the caller
 * must not change afterwards: the CheckedKey keeps it). Throws `CertdeskError('badKey')` only.
 */
export function assessKey(spki: ParsedSpki): CheckedKey {
  if (spki.oid === RSA_ENCRYPTION_OID) return assessRsa(spki);
  if (spki.oid === EC_PUBLIC_KEY_OID) return assessEc(spki);
  const name = OTHER_KEY_TYPES[spki.oid] ?? `with OID ${spki.oid}`;
  throw badKey(`Key type ${name} is not certified; ${USE_INSTEAD}.`);
}

function keyId(spki: ParsedSpki): Uint8Array {
  return new Uint8Array(createHash('sha1').update(spki.key).digest());
}

function assessRsa(spki: ParsedSpki): CheckedKey {
  // BR §7.1.3.1.1: the parameters are exactly NULL; the SPKI is copied into the certificate as-is.
  if (spki.params === undefined || !isNull(spki.params))
    throw badKey('RSA key with AlgorithmIdentifier parameters other than NULL is not accepted.');
  let modulus: Uint8Array;
  let exponent: Uint8Array;
  try {
    ({ modulus, exponent } = rsaPublicNumbers(spki));
  } catch (e) {
    throw badKey('The RSA public key could not be parsed: it is not a valid RSAPublicKey.', e);
  }

  // Sizes first, from the bytes: no bigint work on keys refused anyway.
  const bits = modulus.length === 0 ? 0 : (modulus.length - 1) * 8 + (32 - Math.clz32(modulus[0]!));
  if (bits < MIN_RSA_BITS) throw badKey(`RSA key of ${bits} bits: at least ${MIN_RSA_BITS} are required.`);
  if (bits > MAX_RSA_BITS) throw badKey(`RSA key of ${bits} bits: at most ${MAX_RSA_BITS} are accepted.`);
  if (bits % 8 !== 0) throw badKey(`RSA key of ${bits} bits: the modulus length must be a multiple of 8 bits.`);

  // BR §6.1.6: an odd exponent with 2^16+1 ≤ e ≤ 2^256−1.
  if (exponent.length > 33)
    throw badKey(`RSA public exponent of ${exponent.length * 8} bits is not allowed: it exceeds 2^256; use 65537.`);
  const e = toBigInt(exponent);
  const shown = e < 1n << 64n ? e.toString() : `of ${e.toString(2).length} bits`;
  if ((e & 1n) === 0n) throw badKey(`RSA public exponent ${shown} is not allowed: it is even; use 65537.`);
  if (e < 65537n) throw badKey(`RSA public exponent ${shown} is not allowed: it is below 65537; use 65537.`);
  if (e > MAX_EXPONENT) throw badKey(`RSA public exponent ${shown} is not allowed: it exceeds 2^256; use 65537.`);
  // OpenSSL refuses public operations with e above 64 bits once n exceeds 3072 bits
  // (RSA_MAX_PUBEXP_BITS): such a request could never be verified, nor the key used.
  if (bits > 3072 && e >= 1n << 64n) {
    throw badKey(
      `RSA public exponent ${shown} is not supported with a ${bits}-bit modulus: above 3072 bits it must be below 2^64; use 65537.`,
    );
  }

  const n = toBigInt(modulus);
  const factor = smallFactor(n);
  if (factor !== undefined) throw badKey(`RSA modulus has a small factor (${factor}): it is not a valid RSA key.`);
  if (fermatFactorable(n)) throw badKey('RSA key is factorable (Fermat): its primes are too close.');
  return Object.freeze({ spki: spki.der, type: 'rsa', bits, keyId: keyId(spki) });
}

function toBigInt(bytes: Uint8Array): bigint {
  return BigInt(`0x${Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('hex')}`);
}

function smallFactor(n: bigint): number | undefined {
  for (const chunk of PRIME_CHUNKS) {
    const r = Number(n % chunk.product);
    for (const p of chunk.primes) if (r % p === 0) return p;
  }
  return undefined;
}

/** Fermat's method for FERMAT_ROUNDS rounds from ⌈√n⌉, as Boulder's goodkey does (CVE-2022-26320). */
function fermatFactorable(n: bigint): boolean {
  let a = isqrt(n);
  if (a * a < n) a += 1n;
  let b2 = a * a - n;
  // (a+1)² − a² = 2a + 1: each round is two additions rather than a multiplication.
  let step = 2n * a + 1n;
  for (let i = 0; i < FERMAT_ROUNDS; i++) {
    if (isSquare(b2)) return true;
    b2 += step;
    step += 2n;
  }
  return false;
}

function isSquare(x: bigint): boolean {
  if (!SQUARES_256[Number(x & 255n)]) return false;
  const r = Number(x % M_63_65_11);
  if (!SQUARES_63[r % 63] || !SQUARES_65[r % 65] || !SQUARES_11[r % 11]) return false;
  const root = isqrt(x);
  return root * root === x;
}

/** ⌊√n⌋ by Newton's method, started from above with a float estimate of the top bits. */
function isqrt(n: bigint): bigint {
  if (n < 2n) return n;
  const bits = n.toString(16).length * 4;
  // An even shift leaving at most 53 bits, so the Number is exact and the root shifts back by half.
  const shift = Math.max(0, (bits - 52) & ~1);
  let x = (BigInt(Math.ceil(Math.sqrt(Number(n >> BigInt(shift))))) + 1n) << BigInt(shift / 2);
  for (;;) {
    const y = (x + n / x) >> 1n;
    if (y >= x) return x;
    x = y;
  }
}

function assessEc(spki: ParsedSpki): CheckedKey {
  const params = spki.params;
  if (params === undefined || params.tag !== TAG.OID) {
    throw badKey(
      'ECDSA key with explicit or implicit curve parameters is not certified: use the named curve P-256 or P-384.',
    );
  }
  let oid: string;
  try {
    oid = oidText(spki.der, params);
  } catch (e) {
    throw badKey('The ECDSA public key could not be parsed: its curve identifier is damaged.', e);
  }
  const curve = CURVES[oid];
  if (curve === undefined)
    throw badKey(`ECDSA key on curve ${OTHER_CURVES[oid] ?? oid} is not certified; use P-256 or P-384.`);
  const point = spki.key;
  const size = curve.bits / 8;
  if (point.length === size + 1 && (point[0] === 2 || point[0] === 3)) {
    throw badKey(`ECDSA ${curve.name} key with a compressed point is not accepted: send the uncompressed form.`);
  }
  // Partial public-key validation (NIST SP 800-56A §5.6.2.3.4): the form and coordinate range
  // here, on-curve by OpenSSL's EC_POINT_oct2point. Both curves have cofactor 1.
  if (
    point.length !== 2 * size + 1 ||
    point[0] !== 4 ||
    Buffer.compare(point.subarray(1, 1 + size), curve.p) >= 0 ||
    Buffer.compare(point.subarray(1 + size), curve.p) >= 0
  ) {
    throw badKey(`ECDSA ${curve.name} public key is not a valid point on the curve.`);
  }
  try {
    // ~13 µs, where loading a KeyObject from the SPKI costs ~110 µs.
    ECDH.convertKey(point, curve.openssl, undefined, undefined, 'uncompressed');
  } catch (e) {
    throw badKey(`ECDSA ${curve.name} public key is not a valid point on the curve.`, e);
  }
  return Object.freeze({ spki: spki.der, type: 'ecdsa', bits: curve.bits, curve: curve.name, keyId: keyId(spki) });
}
