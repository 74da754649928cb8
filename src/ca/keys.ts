import {
  createCipheriv,
  hkdfSync,
  createDecipheriv,
  createHmac,
  createPrivateKey,
  createPublicKey,
  randomBytes,
  sign,
  type KeyObject,
} from 'node:crypto';
import { chmodSync, closeSync, existsSync, openSync, readFileSync, statSync, writeSync } from 'node:fs';
import { children, contents, readTlv } from '../core/der.js';
import { isUniqueViolation, type CaKeyRow, type CaRepo } from '../storage/index.js';
import type { Signer } from './crl.js';
import { NULL, oid, seq } from './der-writer.js';
import { isOfAlgorithm, newKeyPair, type CaKeyAlgorithm } from './key-pairs.js';
import { OID, keyIdentifier } from './x509.js';

export type { CaKeyAlgorithm } from './key-pairs.js';
export type SignatureHash = 'sha256' | 'sha384' | 'sha1';

/** A CA key as the rest of the CA sees it: its public half and the power to sign, never the secret. */
export interface CaKey {
  readonly id: string;
  readonly type: 'rsa' | 'ecdsa';
  readonly bits: number;
  readonly spki: Uint8Array;
  /** subjectKeyIdentifier of certificates for this key (RFC 5280 method 1). */
  readonly keyId: Uint8Array;
  signer(hash?: SignatureHash): Signer;
}

/**
 * Where CA private keys live. The built-in store seals them in the database under a key file; a
 * PKCS#11 token (an HSM) can implement the same three calls and keep the keys inside the device.
 */
export interface KeyStore {
  /**
   * Stores a new key under `id` and opens it. `made`, when given, is a key pair of `algorithm`
   * made ahead for this id (KeyPairSource, key-pairs.ts); a store that makes keys inside a device
   * ignores it. When another process stored a key under the same id first, that key is returned
   * instead (concurrent first starts converge on one key). Throws when `made` is not of `algorithm`.
   */
  generate(id: string, algorithm: CaKeyAlgorithm, createdAt: number, made?: Promise<KeyObject>): Promise<CaKey>;
  /** Every key, opened: throws KeyFileError when the key file does not open them. */
  loadAll(): Promise<CaKey[]>;
}

export class KeyFileError extends Error {}

const KEY_FILE_BYTES = 32;

/**
 * Reads the 256-bit key-encryption key, creating it (mode 0600, never overwriting) when the file
 * does not exist yet. The file holds the key in hex followed by a newline.
 */
export function readOrCreateKeyFile(path: string): Buffer {
  if (!existsSync(path)) {
    const key = randomBytes(KEY_FILE_BYTES);
    try {
      const fd = openSync(path, 'wx', 0o600);
      try {
        writeSync(fd, `${key.toString('hex')}\n`);
      } finally {
        closeSync(fd);
      }
      chmodSync(path, 0o600);
      return key;
    } catch (e) {
      // Another process created it first: read theirs.
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST')
        throw new KeyFileError(`cannot create the CA key file ${path}: ${(e as Error).message}`);
    }
  }
  const mode = statSync(path).mode & 0o077;
  if (mode !== 0)
    throw new KeyFileError(
      `the CA key file ${path} is readable by group or others (mode ${(statSync(path).mode & 0o777).toString(8)}): chmod 600 it`,
    );
  const text = readFileSync(path, 'utf8').trim();
  if (!/^[0-9a-f]{64}$/i.test(text))
    throw new KeyFileError(`the CA key file ${path} does not hold a 256-bit key in hex`);
  return Buffer.from(text, 'hex');
}

/** AES-256-GCM with the key id as associated data: a sealed key cannot be swapped onto another id. */
function seal(kek: Buffer, id: string, plaintext: Uint8Array): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', kek, iv);
  cipher.setAAD(Buffer.from(id, 'utf8'));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
}

function unseal(kek: Buffer, id: string, sealed: string): Buffer {
  const raw = Buffer.from(sealed, 'base64');
  const decipher = createDecipheriv('aes-256-gcm', kek, raw.subarray(0, 12));
  decipher.setAAD(Buffer.from(id, 'utf8'));
  decipher.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]);
}

/** Seals the small secrets of other components (TOTP seeds) so they are not stored in the clear. */
export interface SecretSealer {
  /** AES-256-GCM under the purpose's key, `id` as associated data (a sealed secret cannot move to another id). */
  seal(id: string, plaintext: string): string;
  /** Throws when `sealed` was not sealed for `id` with this key. */
  open(id: string, sealed: string): string;
}

/**
 * A sealer under a key derived from the key file's (HKDF-SHA256, `purpose` as info): what it seals
 * never shares a key with the CA keys, and opens only where the key file is.
 */
export function secretSealer(kek: Buffer, purpose: string): SecretSealer {
  const key = Buffer.from(hkdfSync('sha256', kek, Buffer.alloc(0), `certdesk ${purpose}`, 32));
  return {
    seal: (id, plaintext) => seal(key, id, Buffer.from(plaintext, 'utf8')),
    open: (id, sealed) => unseal(key, id, sealed).toString('utf8'),
  };
}

/**
 * A keyed MAC (HMAC-SHA256, base64url) under a key derived from the key file's like secretSealer's:
 * values only this installation can compute from an input (the web interface's session tokens).
 */
export function secretMac(kek: Buffer, purpose: string): (input: string) => string {
  const key = Buffer.from(hkdfSync('sha256', kek, Buffer.alloc(0), `certdesk ${purpose}`, 32));
  return (input) => createHmac('sha256', key).update(input, 'utf8').digest('base64url');
}

/** AlgorithmIdentifier of the signatures a key makes with a hash. */
export function signatureAlgorithm(type: 'rsa' | 'ecdsa', hash: SignatureHash): Uint8Array {
  if (type === 'rsa')
    return seq(
      oid(hash === 'sha1' ? OID.sha1WithRsa : hash === 'sha384' ? OID.sha384WithRsa : OID.sha256WithRsa),
      NULL,
    );
  if (hash === 'sha1') throw new Error('ECDSA CA keys never sign with SHA-1');
  return seq(oid(hash === 'sha384' ? OID.ecdsaWithSha384 : OID.ecdsaWithSha256));
}

/** The subjectPublicKey BIT STRING value of a SubjectPublicKeyInfo. */
export function subjectPublicKey(spki: Uint8Array): Uint8Array {
  const [, key] = children(spki, readTlv(spki, 0));
  if (key === undefined) throw new Error('bad SubjectPublicKeyInfo');
  return contents(spki, key).subarray(1);
}

function openKey(id: string, type: 'rsa' | 'ecdsa', bits: number, spki: Uint8Array, privateKey: KeyObject): CaKey {
  const defaultHash: SignatureHash = type === 'ecdsa' && bits === 384 ? 'sha384' : 'sha256';
  const signers = new Map<SignatureHash, Signer>();
  return {
    id,
    type,
    bits,
    spki,
    keyId: keyIdentifier(subjectPublicKey(spki)),
    signer(hash = defaultHash) {
      let s = signers.get(hash);
      if (s === undefined) {
        const algorithm = signatureAlgorithm(type, hash);
        s = { algorithm, sign: (data) => sign(hash, data, privateKey) };
        signers.set(hash, s);
      }
      return s;
    },
  };
}

/** CA keys sealed with AES-256-GCM in the database, opened with the key file. */
export class SealedKeyStore implements KeyStore {
  constructor(
    private readonly repo: CaRepo,
    private readonly kek: Buffer,
    private readonly keyFile: string,
  ) {}

  async generate(id: string, algorithm: CaKeyAlgorithm, createdAt: number, made?: Promise<KeyObject>): Promise<CaKey> {
    const privateKey = await (made ?? newKeyPair(algorithm));
    if (!isOfAlgorithm(privateKey, algorithm))
      throw new Error(`CA key ${id}: the key pair given is not ${describeAlgorithm(algorithm)}`);
    const spki = createPublicKey(privateKey).export({ type: 'spki', format: 'der' });
    const pkcs8 = privateKey.export({ type: 'pkcs8', format: 'der' });
    const bits = algorithm.type === 'rsa' ? algorithm.bits : algorithm.curve === 'P-384' ? 384 : 256;
    try {
      await this.repo.insertKey({
        id,
        key_type: algorithm.type,
        bits,
        spki: spki.toString('base64'),
        sealed: seal(this.kek, id, pkcs8),
        created_at: createdAt,
      });
    } catch (e) {
      // Another process starting at the same moment stored its key under this id first: use theirs.
      const stored = isUniqueViolation(e) ? (await this.repo.listKeys()).find((row) => row.id === id) : undefined;
      if (stored === undefined) throw e;
      return this.open(stored);
    } finally {
      pkcs8.fill(0);
    }
    return openKey(id, algorithm.type, bits, spki, privateKey);
  }

  async loadAll(): Promise<CaKey[]> {
    return (await this.repo.listKeys()).map((row) => this.open(row));
  }

  private open(row: CaKeyRow): CaKey {
    let pkcs8: Buffer;
    try {
      pkcs8 = unseal(this.kek, row.id, row.sealed);
    } catch {
      throw new KeyFileError(
        `the CA key file ${this.keyFile} does not open CA key ${row.id}: it is not the file the keys were sealed with (restore the original file, or set CERTDESK_CA_KEY_FILE to it)`,
      );
    }
    const privateKey = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' });
    pkcs8.fill(0);
    const type = row.key_type === 'rsa' ? 'rsa' : 'ecdsa';
    return openKey(row.id, type, row.bits, Buffer.from(row.spki, 'base64'), privateKey);
  }
}

/** `RSA-2048`, `ECDSA P-256`: how logs and `ca list` name an algorithm. */
export function describeAlgorithm(a: CaKeyAlgorithm): string {
  return a.type === 'rsa' ? `RSA-${a.bits}` : `ECDSA ${a.curve}`;
}
