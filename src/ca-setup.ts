// The built-in CA as the composition root sets it up: where its key file is, the catalog's brands
// as CA hierarchies, the roots the scans trust, and `ca init` at a first start.
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import type { BrandHierarchy, BuiltinCa, KeyPairSource } from './ca/index.js';
import type { Config } from './config/index.js';
import type { CatalogService } from './ra/catalog/catalog.js';

/** The built-in CA's roots (PEM), for the scans' trust store; none before `ca init` made them. */
export function caRoots(ca: BuiltinCa, catalog: CatalogService): string[] {
  const roots = new Set<string>();
  for (const brand of catalog.brands())
    for (const sha of brand.signatureHashAlgorithms) {
      try {
        roots.add(ca.chain(brand.id, sha).root);
      } catch {
        // That chain is not made yet (or the brand has none): nothing to trust.
      }
    }
  return [...roots];
}

/** CERTDESK_CA_KEY_FILE, else `ca-keys.secret` in the data directory. */
export function caKeyFile(config: Config): string {
  if (config.caKeyFile !== undefined && config.caKeyFile !== '') return config.caKeyFile;
  const dir = resolve(config.dataDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return join(dir, 'ca-keys.secret');
}

/** The CA's view of each catalog brand: its hierarchy id, chains, and whether it sells code signing or S/MIME. */
export function brandHierarchies(catalog: CatalogService): BrandHierarchy[] {
  const types = new Map<string, Set<string>>();
  for (const code of catalog.productCodes()) {
    const p = catalog.product(code);
    if (!types.has(p.brand)) types.set(p.brand, new Set());
    types.get(p.brand)!.add(p.type);
  }
  return catalog.brands().map((b) => ({
    id: b.id,
    name: b.name,
    issuer: b.issuer,
    signatureHashAlgorithms: b.signatureHashAlgorithms,
    codeSigning: types.get(b.id)?.has('CODESIGN') ?? false,
    smime: types.get(b.id)?.has('SMIME') ?? false,
  }));
}

/**
 * `ca init` at a first start: creates what is missing of the CA hierarchy, tolerant of another
 * process doing the same at the same moment (the CA adopts what the other stored first; a failure
 * is retried from what is stored). Throws after the fifth failure.
 */
export async function initCa(
  ca: BuiltinCa,
  logger: Pick<Logger, 'info' | 'warn'>,
  config: Pick<Config, 'caRsaRootBits' | 'caRsaIntermediateBits'>,
  keyPairs?: KeyPairSource,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      const started = Date.now();
      const created = await ca.init({
        log: (line) => logger.info(line),
        rsaRootBits: config.caRsaRootBits,
        rsaIntermediateBits: config.caRsaIntermediateBits,
        ...(keyPairs === undefined ? {} : { keyPairs }),
      });
      if (created.length > 0) logger.info({ created, ms: Date.now() - started }, 'CA hierarchy created');
      return;
    } catch (err) {
      await ca.load();
      if (ca.isInitialized()) return;
      if (attempt >= 5) throw err;
      logger.warn({ err }, 'CA init failed (a race with another process?): retrying');
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
}
