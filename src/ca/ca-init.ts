// What `BuiltinCa.init` creates, and the keys it makes for that, all at once.
import { availableParallelism } from 'node:os';
import type { CaCertificateRow } from '../storage/index.js';
import { hierarchySpecs, signCaCertificate, type BrandHierarchy, type CaRole, type CaSpec } from './hierarchy.js';
import { newSerial, serialHex } from './serials.js';
import { name } from './x509.js';
import type { CaKey, CaKeyAlgorithm } from './keys.js';

/** A CA certificate that `init` is to create: the next generation of a role of a brand. */
export interface PlannedCert {
  readonly brand: BrandHierarchy;
  readonly spec: CaSpec;
  readonly id: string;
  readonly generation: number;
  /** The key it certifies: its own new key, or its twin's (cross-signed and legacy intermediates). */
  readonly keyId: string;
}

/** A stored CA certificate, as much of it as planning reads. */
export interface ExistingCert {
  readonly row: Pick<CaCertificateRow, 'id' | 'role' | 'generation' | 'distrust_phase1'>;
  readonly key: { readonly id: string };
}

export interface PlanOptions {
  readonly rsaRootBits?: number;
  readonly rsaIntermediateBits?: number;
}

/**
 * The certificates to create, parents first (each brand in `hierarchySpecs` order): a role gets a
 * new generation when it has no trusted certificate (none yet, or every one distrusted). A role
 * that reuses its twin's key certifies the twin's current key, or the twin's key planned here.
 * `findCert` is the CA's choice of a role's current certificate.
 */
export function planHierarchy(
  brands: readonly BrandHierarchy[],
  certs: readonly ExistingCert[],
  findCert: (issuer: string, role: CaRole) => ExistingCert | undefined,
  options: PlanOptions = {},
): PlannedCert[] {
  const plan: PlannedCert[] = [];
  for (const brand of brands) {
    const planned = new Map<CaRole, PlannedCert>();
    for (const spec of hierarchySpecs(brand, options)) {
      const existing = certs.filter((c) => c.row.id.startsWith(`${brand.issuer}-`) && c.row.role === spec.role);
      if (existing.some((c) => c.row.distrust_phase1 === null)) continue;
      const generation = existing.reduce((max, c) => Math.max(max, c.row.generation), 0) + 1;
      const twinKey =
        spec.keyRole === spec.role
          ? undefined
          : (planned.get(spec.keyRole)?.keyId ?? findCert(brand.issuer, spec.keyRole)?.key.id);
      const item: PlannedCert = {
        brand,
        spec,
        id: `${brand.issuer}-${spec.role}-${generation}`,
        generation,
        keyId: twinKey ?? `${brand.issuer}-${spec.keyRole}-${generation}`,
      };
      planned.set(spec.role, item);
      plan.push(item);
    }
  }
  return plan;
}

/** The keys a plan needs that are not stored yet, each once, with the algorithm of its spec. */
export function missingKeys(
  plan: readonly PlannedCert[],
  have: (keyId: string) => boolean,
): { id: string; algorithm: CaKeyAlgorithm }[] {
  const wanted = new Map<string, CaKeyAlgorithm>();
  for (const p of plan) if (!have(p.keyId) && !wanted.has(p.keyId)) wanted.set(p.keyId, p.spec.algorithm);
  return [...wanted].map(([id, algorithm]) => ({ id, algorithm }));
}

/**
 * How many keys are made at once: one per core, at most 3. Key generation runs in libuv's thread
 * pool (4 threads unless UV_THREADPOOL_SIZE says otherwise); one thread is left for the file
 * system and DNS work that shares that pool.
 */
export function keyParallelism(): number {
  return Math.max(1, Math.min(availableParallelism(), 3));
}

/** Relative cost of making a key: an RSA prime search grows steeply with the size; ECDSA is instant. */
const cost = (a: CaKeyAlgorithm) => (a.type === 'rsa' ? a.bits : 0);

/**
 * Makes the keys with at most `parallel` under way at once, the costliest first (longest
 * processing time first: on 2 cores the two RSA-4096 roots start together and the small keys fill
 * in behind whichever finishes first). After a failure no further key is started, and every one
 * under way is awaited before the first error is thrown, so none is written after this returns.
 */
export async function makeKeys(
  wanted: readonly { id: string; algorithm: CaKeyAlgorithm }[],
  make: (id: string, algorithm: CaKeyAlgorithm) => Promise<CaKey>,
  parallel = keyParallelism(),
): Promise<CaKey[]> {
  const queue = [...wanted].sort((a, b) => cost(b.algorithm) - cost(a.algorithm));
  const made: CaKey[] = [];
  const errors: unknown[] = [];
  const worker = async () => {
    for (let next = queue.shift(); next !== undefined && errors.length === 0; next = queue.shift()) {
      try {
        made.push(await make(next.id, next.algorithm));
      } catch (e) {
        errors.push(e);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(Math.max(1, parallel), queue.length) }, worker));
  if (errors.length > 0) throw errors[0];
  return made;
}

const DAY = 86_400;

/**
 * Signs the CA certificate `planned` calls for, with `key` and under `parent` (self-signed without
 * one), valid `spec.years` but never past its parent; returns it with its row as stored.
 */
export function newCaCertificate(
  planned: PlannedCert,
  key: CaKey,
  parent:
    | {
        readonly row: Pick<CaCertificateRow, 'id' | 'not_after'>;
        readonly subject: Uint8Array;
        readonly key: CaKey;
        readonly links: { crl: string; caIssuers: string; ocsp: string };
      }
    | undefined,
  now: number,
): { row: CaCertificateRow; der: Uint8Array; subject: Uint8Array } {
  const { spec } = planned;
  const subject = name(spec.subject);
  const serial = newSerial(now);
  const notAfter = Math.min(now + spec.years * 365 * DAY, parent?.row.not_after ?? Number.MAX_SAFE_INTEGER);
  const der = signCaCertificate(spec, {
    serial,
    subject,
    notBefore: now,
    notAfter,
    key,
    parent: parent === undefined ? undefined : { subject: parent.subject, key: parent.key, links: parent.links },
  });
  const row: CaCertificateRow = {
    id: planned.id,
    brand: planned.brand.id,
    role: spec.role,
    generation: planned.generation,
    key_id: planned.keyId,
    parent_id: parent?.row.id ?? null,
    der: Buffer.from(der).toString('base64'),
    serial: serialHex(serial),
    not_before: now,
    not_after: notAfter,
    distrust_phase1: null,
    distrust_phase2: null,
    created_at: now,
  };
  return { row, der, subject };
}
