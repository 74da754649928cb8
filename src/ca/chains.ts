import { X509Certificate } from 'node:crypto';
import { CertdeskError, type ProductType, type SignatureHashAlgorithm } from '../core/index.js';
import type { CaCertificateRow } from '../storage/index.js';
import type { BrandHierarchy, CaRole } from './hierarchy.js';
import type { CaKey } from './keys.js';

// Which CA certificates a leaf is signed under and delivered with (DESIGN §5.7).

/** A CA certificate with what chain building needs, decoded once at load. */
export interface CaCert {
  readonly row: CaCertificateRow;
  readonly der: Uint8Array;
  readonly pem: string;
  readonly subject: Uint8Array;
  readonly key: CaKey;
}

/** How a leaf is signed and delivered: the signing CA certificate, the chain above it. */
export interface Chain {
  readonly issuerCert: CaCert;
  /** Intermediates delivered to the subscriber, leaf side first (no root). */
  readonly intermediates: readonly CaCert[];
  readonly root: CaCert;
  readonly intermediatePem: string;
}

/**
 * The chain a product and SignatureHashAlgorithm get (DESIGN §5.7) among `certs`: the RSA chain,
 * the ECC intermediate under the RSA root (hybrid), the ECC root, or the legacy root; code signing
 * and S/MIME on their own RSA intermediates. Throws unknownProduct for an unknown brand,
 * invalidInput for a chain the brand does not offer, notReady while the hierarchy is incomplete.
 */
export function resolveChain(
  brands: readonly BrandHierarchy[],
  certs: ReadonlyMap<string, CaCert>,
  brandId: string,
  sha: SignatureHashAlgorithm,
  type: ProductType,
): Chain {
  const brand = brands.find((b) => b.id === brandId);
  if (brand === undefined) throw new CertdeskError('unknownProduct', `no CA hierarchy for brand ${brandId}`);
  if (!brand.signatureHashAlgorithms.includes(sha)) {
    throw new CertdeskError(
      'invalidInput',
      `SignatureHashAlgorithm ${sha} is not offered by ${brand.name} (offered: ${brand.signatureHashAlgorithms.join(', ')})`,
      { field: 'SignatureHashAlgorithm' },
    );
  }
  let roles: readonly CaRole[];
  if (type === 'CODESIGN' || type === 'SMIME') {
    if (sha !== 'SHA256-FULL-CHAIN')
      throw new CertdeskError(
        'invalidInput',
        `${type} certificates are issued on the RSA chain only (SHA256-FULL-CHAIN)`,
        { field: 'SignatureHashAlgorithm' },
      );
    roles = [type === 'CODESIGN' ? 'codesign-int' : 'smime-int', 'rsa-root'];
  } else {
    roles = {
      'SHA256-FULL-CHAIN': ['rsa-int', 'rsa-root'],
      'SHA256-ECC-HYBRID': ['ecc-int-x', 'rsa-root'],
      'SHA256-ECC-FULL': ['ecc-int', 'ecc-root'],
      'SHA2-256': ['rsa-int-legacy', 'legacy-root'],
    }[sha] as readonly CaRole[];
  }
  const found = roles.map((r) => findCert(certs, brand.issuer, r));
  if (found.some((c) => c === undefined))
    throw new CertdeskError(
      'notReady',
      `the CA hierarchy of ${brand.name} is not initialized: run \`certdesk ca init\``,
    );
  const chain = found as CaCert[];
  const intermediates = chain.slice(0, -1);
  return {
    issuerCert: chain[0]!,
    intermediates,
    root: chain[chain.length - 1]!,
    intermediatePem: intermediates.map((c) => c.pem).join(''),
  };
}

/** The newest trusted certificate of a role (a distrusted one only when there is no other). */
export function findCert(certs: ReadonlyMap<string, CaCert>, issuer: string, role: CaRole): CaCert | undefined {
  let best: CaCert | undefined;
  for (const c of certs.values()) {
    if (!c.row.id.startsWith(`${issuer}-`) || c.row.role !== role) continue;
    const distrusted = c.row.distrust_phase1 !== null;
    const bestDistrusted = best?.row.distrust_phase1 !== null && best !== undefined;
    if (
      best === undefined ||
      (bestDistrusted && !distrusted) ||
      (bestDistrusted === distrusted && c.row.generation > best.row.generation)
    )
      best = c;
  }
  return best;
}

/** A CA certificate as `ca list` and `/pki/` show it. */
export interface CaCertificateInfo {
  id: string;
  brand: string;
  role: string;
  keyId: string;
  keyType: string;
  bits: number;
  parent: string | null;
  subject: string;
  notBefore: number;
  notAfter: number;
  distrust: { phase1: number | null; phase2: number | null } | null;
  pem: string;
}

export function describeCaCert(c: CaCert): CaCertificateInfo {
  return {
    id: c.row.id,
    brand: c.row.brand,
    role: c.row.role,
    keyId: c.key.id,
    keyType: c.key.type,
    bits: c.key.bits,
    parent: c.row.parent_id,
    subject: new X509Certificate(c.der).subject.replace(/\n/g, ', '),
    notBefore: c.row.not_before,
    notAfter: c.row.not_after,
    distrust:
      c.row.distrust_phase1 === null && c.row.distrust_phase2 === null
        ? null
        : { phase1: c.row.distrust_phase1, phase2: c.row.distrust_phase2 },
    pem: c.pem,
  };
}
