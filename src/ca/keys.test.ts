import { createPublicKey } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CaRepo, migrateToLatest, openDatabase, type Db } from '../storage/index.js';
import { keyPairsMadeAhead, newKeyPair } from './key-pairs.js';
import { readOrCreateKeyFile, SealedKeyStore, type CaKeyAlgorithm } from './keys.js';

const P256: CaKeyAlgorithm = { type: 'ecdsa', curve: 'P-256' };
const P384: CaKeyAlgorithm = { type: 'ecdsa', curve: 'P-384' };
const spkiOf = (key: Awaited<ReturnType<typeof newKeyPair>>) =>
  createPublicKey(key).export({ type: 'spki', format: 'der' });

describe('SealedKeyStore.generate', () => {
  let db: Db;
  let store: () => SealedKeyStore;
  beforeEach(async () => {
    db = await openDatabase({ url: ':memory:' });
    await migrateToLatest(db);
    const file = join(mkdtempSync(join(tmpdir(), 'certdesk-keys-')), 'ca-keys.secret');
    // Each call is another process's store: same database, same key file.
    store = () => new SealedKeyStore(new CaRepo(db), readOrCreateKeyFile(file), file);
  });
  afterEach(() => db.close());

  it('ok/stores the key made ahead for it, sealed; loadAll opens the same key', async () => {
    const made = await newKeyPair(P256);
    const key = await store().generate('x-ecc-int-1', P256, 1, Promise.resolve(made));
    expect(Buffer.from(key.spki)).toEqual(spkiOf(made));
    const [loaded] = await store().loadAll();
    expect(loaded).toMatchObject({ id: 'x-ecc-int-1', type: 'ecdsa', bits: 256 });
    expect(Buffer.from(loaded!.spki)).toEqual(spkiOf(made));
  });

  it('fail/a key made ahead of another algorithm is refused and nothing is stored', async () => {
    await expect(store().generate('x-ecc-root-1', P384, 1, newKeyPair(P256))).rejects.toThrow(/not ECDSA P-384/);
    expect(await store().loadAll()).toEqual([]);
  });

  it('ok/when another process stored a key under the id first, that key is returned: both go on with one key', async () => {
    const [first, second] = [await newKeyPair(P256), await newKeyPair(P256)];
    const a = await store().generate('x-ecc-int-1', P256, 1, Promise.resolve(first));
    const b = await store().generate('x-ecc-int-1', P256, 2, Promise.resolve(second));
    expect(Buffer.from(b.spki)).toEqual(Buffer.from(a.spki));
    expect(Buffer.from(b.spki)).toEqual(spkiOf(first));
    expect(await store().loadAll()).toHaveLength(1);
  });
});

describe('keyPairsMadeAhead', () => {
  it('ok/hands each key pair out once, to the first id asking for its algorithm; then the store makes its own', async () => {
    const source = keyPairsMadeAhead([P256, P384]);
    expect(source('a-ecc-root-1', { type: 'rsa', bits: 2048 })).toBeUndefined();
    const p384 = await source('a-ecc-root-1', P384);
    expect(p384?.asymmetricKeyDetails?.namedCurve).toBe('secp384r1');
    expect(source('b-ecc-root-1', P384)).toBeUndefined();
    expect((await source('a-ecc-int-1', P256))?.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    expect(source('b-ecc-int-1', P256)).toBeUndefined();
  });
});
