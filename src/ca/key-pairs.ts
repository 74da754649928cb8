// New CA key pairs, and key pairs made ahead of need. No imports beyond node:crypto, so the CLI can
// start a first start's root keys before the rest of the program has loaded.
import { generateKeyPair, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';

const generate = promisify(generateKeyPair);

/** The key types a CA key may have: RSA of a size, or ECDSA on a named curve. */
export type CaKeyAlgorithm =
  { readonly type: 'rsa'; readonly bits: number } | { readonly type: 'ecdsa'; readonly curve: 'P-256' | 'P-384' };

/**
 * Key pairs made before they are stored: by key id and algorithm, a private key being made (or
 * made earlier), or undefined to have the key store make one. Tests hand out one set of fixture
 * keys this way instead of searching primes for every test.
 */
export type KeyPairSource = (id: string, algorithm: CaKeyAlgorithm) => Promise<KeyObject> | undefined;

/**
 * A new private key of `algorithm`, made by OpenSSL in libuv's thread pool: an RSA-4096 prime
 * search takes seconds (0.5–5 s, random), and the event loop stays free meanwhile.
 */
export async function newKeyPair(algorithm: CaKeyAlgorithm): Promise<KeyObject> {
  const { privateKey } =
    algorithm.type === 'rsa'
      ? await generate('rsa', { modulusLength: algorithm.bits, publicExponent: 65537 })
      : await generate('ec', { namedCurve: algorithm.curve });
  return privateKey;
}

const CURVE_NAMES: Record<string, string> = { 'P-256': 'prime256v1', 'P-384': 'secp384r1' };

/** Whether a private key is of the algorithm (RSA modulus size, or ECDSA curve). */
export function isOfAlgorithm(key: KeyObject, a: CaKeyAlgorithm): boolean {
  const details = key.asymmetricKeyDetails ?? {};
  return a.type === 'rsa'
    ? key.asymmetricKeyType === 'rsa' && details.modulusLength === a.bits
    : key.asymmetricKeyType === 'ec' && details.namedCurve === CURVE_NAMES[a.curve];
}

/**
 * Starts making one key pair of each algorithm given, now, and returns the source that hands each
 * out once, to the first key id that asks for its algorithm; later asks get undefined (the store
 * makes its own). A pair nobody asks for is dropped. A failed generation is handed out as such
 * (the store's `generate` then throws, and the caller's retry makes a fresh one).
 */
export function keyPairsMadeAhead(algorithms: readonly CaKeyAlgorithm[]): KeyPairSource {
  const ahead = algorithms.map((algorithm) => {
    const made = newKeyPair(algorithm);
    // Not awaited until asked for: a failure must not surface as an unhandled rejection meanwhile.
    made.catch(() => undefined);
    return { algorithm, made };
  });
  return (_id, algorithm) => {
    const i = ahead.findIndex((a) => JSON.stringify(a.algorithm) === JSON.stringify(algorithm));
    return i < 0 ? undefined : ahead.splice(i, 1)[0]!.made;
  };
}
