// One set of CA keys per test run. RSA-4096 roots take seconds of random prime search each (more
// on a loaded machine): made once by the global setup (test/global-setup.ts), they are handed to
// every CA a test creates, which then only seals them under its own key file and signs its
// certificates (with its own clock and URLs). No test's pass depends on how fast primes are found.
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inject } from 'vitest';
import {
  isOfAlgorithm,
  newKeyPair,
  readOrCreateKeyFile,
  SealedKeyStore,
  type CaKeyAlgorithm,
  type KeyPairSource,
} from '../../src/ca/index.js';
import { CaRepo, migrateToLatest, openDatabase } from '../../src/storage/index.js';
import { writeCaKeyFixture, type CaKeyFixture } from './ca-fixture-file.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Path of the CA key fixture written by the global setup. */
    caKeyFixture: string;
  }
}

let fixture: Promise<Map<string, { algorithm: CaKeyAlgorithm; key: KeyObject }>> | undefined;

/** The fixture keys by id: the global setup's file, or (run without it) keys made once in this worker. */
function fixtureKeys(): Promise<Map<string, { algorithm: CaKeyAlgorithm; key: KeyObject }>> {
  fixture ??= (async () => {
    const path = inject('caKeyFixture') ?? (await writeCaKeyFixture(mkdtempSync(join(tmpdir(), 'certdesk-ca-keys-'))));
    const parsed = JSON.parse(readFileSync(path, 'utf8')) as CaKeyFixture;
    return new Map(
      parsed.keys.map((k) => [
        k.id,
        {
          algorithm: k.algorithm,
          key: createPrivateKey({ key: Buffer.from(k.pkcs8, 'base64'), format: 'der', type: 'pkcs8' }),
        },
      ]),
    );
  })();
  return fixture;
}

/**
 * The fixture keys as a KeyPairSource for `ca.init({ keyPairs: testCaKeys() })`: a key id of the
 * bundled hierarchies gets its fixture key when the algorithm asked for is the fixture's; any other
 * (a replacement's new generation, another catalog's brand, other sizes) is made as usual.
 */
export function testCaKeys(): KeyPairSource {
  const keys = fixtureKeys();
  return (id, algorithm) =>
    keys.then((m) => {
      const k = m.get(id);
      return k !== undefined && isOfAlgorithm(k.key, algorithm) ? k.key : newKeyPair(algorithm);
    });
}

/**
 * A second set of keys for the same ids, still without a prime search: each id gets the fixture
 * key of the next id (in id order) of the same algorithm. For two CAs racing to create one
 * hierarchy with different keys.
 */
export function otherTestCaKeys(): KeyPairSource {
  const keys = fixtureKeys();
  return (id, algorithm) =>
    keys.then((m) => {
      const same = [...m]
        .filter(([, k]) => isOfAlgorithm(k.key, algorithm))
        .map(([i]) => i)
        .sort();
      const at = same.indexOf(id);
      return at < 0 || same.length < 2 ? newKeyPair(algorithm) : m.get(same[(at + 1) % same.length]!)!.key;
    });
}

/**
 * A fresh data directory whose SQLite database already holds the fixture keys (no certificates):
 * `certdesk ca init` or a first `certdesk serve` there creates the certificates at once, the way
 * they would after making the keys. The key file is `ca-keys.secret` in it, as by default.
 */
export async function caFixtureDataDir(prefix: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const keyFile = join(dir, 'ca-keys.secret');
  const db = await openDatabase({ url: join(dir, 'certdesk.db') });
  try {
    await migrateToLatest(db);
    const store = new SealedKeyStore(new CaRepo(db), readOrCreateKeyFile(keyFile), keyFile);
    const now = Math.floor(Date.now() / 1000);
    for (const [id, { algorithm, key }] of await fixtureKeys())
      await store.generate(id, algorithm, now, Promise.resolve(key));
  } finally {
    await db.close();
  }
  return dir;
}
