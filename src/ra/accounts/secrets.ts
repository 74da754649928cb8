import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import { hash, verify } from '@node-rs/argon2';

/** A fresh 256-bit secret, base64url, with a prefix that tells people what it is. */
export function newSecret(prefix: string): string {
  return `${prefix}${randomBytes(32).toString('base64url')}`;
}

/**
 * SHA-256 of a high-entropy secret (token, client secret), hex. 256 random bits cannot be
 * guessed, so a fast hash is right here; a slow one would only make the endpoints easy to flood.
 */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** Compares a secret with a stored hashSecret() value in constant time. */
export function secretMatches(secret: string, storedHash: string): boolean {
  const a = Buffer.from(hashSecret(secret), 'hex');
  const b = Buffer.from(storedHash, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

// argon2id (algorithm 2 of @node-rs/argon2) with the library's defaults: ~45 ms a hash here.
const ARGON2ID = 2;

/** Hashes a user password with argon2id. */
export function hashPassword(password: string): Promise<string> {
  return hash(password, { algorithm: ARGON2ID });
}

/** `length` characters drawn uniformly from `alphabet` (node:crypto's unbiased randomInt). */
export function randomString(alphabet: string, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[randomInt(alphabet.length)];
  return out;
}

/** A readable random password for generated admin users: 20 chars from a 57-symbol alphabet (~116 bits). */
export function newPassword(): string {
  return randomString('ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789', 20);
}

/** A valid argon2id hash of a random password: verifying against it costs what a real check costs. */
let decoy: Promise<string> | undefined;

/**
 * Whether `password` matches the argon2id hash `stored`. With no stored hash (an unknown user) it
 * checks against a decoy and answers false, so both cases take the same time (no enumeration).
 */
export async function passwordMatches(password: string, stored: string | undefined): Promise<boolean> {
  decoy ??= hashPassword(randomBytes(16).toString('hex'));
  const target = stored ?? (await decoy);
  let ok = false;
  try {
    ok = await verify(target, password);
  } catch {
    ok = false;
  }
  return ok && stored !== undefined;
}
