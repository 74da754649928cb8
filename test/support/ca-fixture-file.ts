// The CA key fixture file: the keys of every CA hierarchy of the bundled catalog, made once per
// test run by test/global-setup.ts and read by test/support/ca-fixture.ts. No vitest import here:
// the global setup runs outside the test workers.
import type { KeyObject } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { newKeyPair, type CaKeyAlgorithm } from '../../src/ca/index.js';
import { loadConfig } from '../../src/config/index.js';
import { FixedClock } from '../../src/core/index.js';
import { createServices } from '../../src/main.js';
import { migrateToLatest, openDatabase } from '../../src/storage/index.js';

/** Each key by id, with its algorithm, as PKCS#8 DER in base64. */
export interface CaKeyFixture {
  readonly keys: readonly { readonly id: string; readonly algorithm: CaKeyAlgorithm; readonly pkcs8: string }[];
}

/**
 * Makes the keys of every CA hierarchy of the bundled catalog by running `ca.init()` with the
 * default sizes (RSA-4096 roots, as `certdesk ca init` makes them) on a scratch database, and
 * writes them to `<dir>/ca-keys.json` (mode 0600). Returns the path.
 */
export async function writeCaKeyFixture(dir: string): Promise<string> {
  const db = await openDatabase({ url: ':memory:' });
  await migrateToLatest(db);
  const made: { id: string; algorithm: CaKeyAlgorithm; key: KeyObject }[] = [];
  const config = loadConfig({
    CERTDESK_DATA_DIR: '/nonexistent-test-data',
    CERTDESK_DNS_SERVERS: '127.0.0.1:9',
    CERTDESK_CA_KEY_FILE: join(dir, 'scratch-kek.secret'),
  });
  const services = await createServices(config, { db, clock: new FixedClock(1795219200) });
  try {
    await services.ca.init({
      keyPairs: (id, algorithm) =>
        newKeyPair(algorithm).then((key) => {
          made.push({ id, algorithm, key });
          return key;
        }),
    });
  } finally {
    await services.close();
    await db.close();
  }
  const fixture: CaKeyFixture = {
    keys: made.map(({ id, algorithm, key }) => ({
      id,
      algorithm,
      pkcs8: key.export({ type: 'pkcs8', format: 'der' }).toString('base64'),
    })),
  };
  const path = join(dir, 'ca-keys.json');
  writeFileSync(path, JSON.stringify(fixture), { mode: 0o600 });
  return path;
}
