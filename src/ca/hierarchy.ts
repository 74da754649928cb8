import type { SignatureHashAlgorithm } from '../core/index.js';
import type { CaKey, CaKeyAlgorithm, SignatureHash } from './keys.js';
import {
  KU,
  OID,
  authorityInfoAccess,
  authorityKeyIdentifier,
  basicConstraints,
  certificatePolicies,
  crlDistributionPoints,
  extKeyUsage,
  keyUsage,
  signed,
  subjectKeyIdentifier,
  tbsCertificate,
  type NameAttribute,
} from './x509.js';

/** What the CA needs to know of a catalog brand. */
export interface BrandHierarchy {
  readonly id: string;
  readonly name: string;
  /** Prefix of every CA certificate and key id of the brand (URL-safe). */
  readonly issuer: string;
  readonly signatureHashAlgorithms: readonly SignatureHashAlgorithm[];
  readonly codeSigning: boolean;
  readonly smime: boolean;
}

export type CaRole =
  | 'rsa-root'
  | 'ecc-root'
  | 'legacy-root'
  | 'rsa-int'
  | 'ecc-int'
  | 'ecc-int-x'
  | 'rsa-int-legacy'
  | 'codesign-int'
  | 'smime-int';

/** One CA certificate of a brand's hierarchy, in creation order (parents first). */
export interface CaSpec {
  readonly role: CaRole;
  /** The key's own role: the cross-signed and legacy intermediates reuse their twin's key. */
  readonly keyRole: CaRole;
  readonly parentRole: CaRole | null;
  readonly algorithm: CaKeyAlgorithm;
  /** Hash of the parent's signature over this certificate. */
  readonly hash: SignatureHash;
  readonly subject: readonly NameAttribute[];
  readonly years: number;
  /** undefined for roots; 0 for issuing CAs. */
  readonly pathLen?: number;
  readonly extKeyUsage?: readonly string[];
}

/**
 * Each brand's hierarchy (DESIGN §5.7): RSA and ECC roots, RSA and ECC TLS intermediates, the ECC
 * intermediate cross-signed by the RSA root (ECC-HYBRID), the legacy SHA-1 root with the RSA
 * intermediate under it where the brand offers SHA2-256, and dedicated code signing and S/MIME
 * intermediates where the brand sells them (a TLS CA carries serverAuth only).
 */
export function hierarchySpecs(
  brand: BrandHierarchy,
  o: { rsaRootBits?: number; rsaIntermediateBits?: number } = {},
): CaSpec[] {
  const rootRsa: CaKeyAlgorithm = { type: 'rsa', bits: o.rsaRootBits ?? 4096 };
  const intRsa: CaKeyAlgorithm = { type: 'rsa', bits: o.rsaIntermediateBits ?? 2048 };
  const ecRoot: CaKeyAlgorithm = { type: 'ecdsa', curve: 'P-384' };
  const ecInt: CaKeyAlgorithm = { type: 'ecdsa', curve: 'P-256' };
  const subject = (cn: string): NameAttribute[] => [
    { type: OID.organization, value: brand.name },
    { type: OID.commonName, value: `${brand.name} ${cn}` },
  ];
  const specs: CaSpec[] = [
    {
      role: 'rsa-root',
      keyRole: 'rsa-root',
      parentRole: null,
      algorithm: rootRsa,
      hash: 'sha256',
      subject: subject('RSA Root R1'),
      years: 25,
    },
    {
      role: 'ecc-root',
      keyRole: 'ecc-root',
      parentRole: null,
      algorithm: ecRoot,
      hash: 'sha384',
      subject: subject('ECC Root E1'),
      years: 25,
    },
    {
      role: 'rsa-int',
      keyRole: 'rsa-int',
      parentRole: 'rsa-root',
      algorithm: intRsa,
      hash: 'sha256',
      subject: subject('RSA TLS CA 1'),
      years: 5,
      pathLen: 0,
      extKeyUsage: [OID.serverAuth],
    },
    {
      role: 'ecc-int',
      keyRole: 'ecc-int',
      parentRole: 'ecc-root',
      algorithm: ecInt,
      hash: 'sha384',
      subject: subject('ECC TLS CA 1'),
      years: 5,
      pathLen: 0,
      extKeyUsage: [OID.serverAuth],
    },
    // Same subject and key as ecc-int, signed by the RSA root: the ECC-HYBRID chain.
    {
      role: 'ecc-int-x',
      keyRole: 'ecc-int',
      parentRole: 'rsa-root',
      algorithm: ecInt,
      hash: 'sha256',
      subject: subject('ECC TLS CA 1'),
      years: 5,
      pathLen: 0,
      extKeyUsage: [OID.serverAuth],
    },
  ];
  if (brand.signatureHashAlgorithms.includes('SHA2-256')) {
    // A SHA-1 self-signature on the root only: old devices trust it, and nobody verifies a root's own signature.
    specs.push(
      {
        role: 'legacy-root',
        keyRole: 'legacy-root',
        parentRole: null,
        algorithm: { type: 'rsa', bits: o.rsaIntermediateBits ?? 2048 },
        hash: 'sha1',
        subject: subject('Legacy Root'),
        years: 20,
      },
      {
        role: 'rsa-int-legacy',
        keyRole: 'rsa-int',
        parentRole: 'legacy-root',
        algorithm: intRsa,
        hash: 'sha256',
        subject: subject('RSA TLS CA 1'),
        years: 5,
        pathLen: 0,
        extKeyUsage: [OID.serverAuth],
      },
    );
  }
  if (brand.codeSigning) {
    specs.push({
      role: 'codesign-int',
      keyRole: 'codesign-int',
      parentRole: 'rsa-root',
      algorithm: intRsa,
      hash: 'sha256',
      subject: subject('Code Signing CA 1'),
      years: 5,
      pathLen: 0,
      extKeyUsage: [OID.codeSigning],
    });
  }
  if (brand.smime) {
    specs.push({
      role: 'smime-int',
      keyRole: 'smime-int',
      parentRole: 'rsa-root',
      algorithm: intRsa,
      hash: 'sha256',
      subject: subject('S/MIME CA 1'),
      years: 5,
      pathLen: 0,
      extKeyUsage: [OID.emailProtection],
    });
  }
  return specs;
}

/**
 * A CA certificate of a spec: self-signed for a root, else signed by `parent` with the CRL and
 * caIssuers links of the parent. Intermediates get pathLen 0, digitalSignature (they sign OCSP
 * responses themselves), the anyPolicy OID and their EKU.
 */
export function signCaCertificate(
  spec: CaSpec,
  c: {
    serial: Uint8Array;
    subject: Uint8Array;
    notBefore: number;
    notAfter: number;
    key: CaKey;
    parent?: { subject: Uint8Array; key: CaKey; links: { crl: string; caIssuers: string } };
  },
): Uint8Array {
  const parent = c.parent;
  const signerKey = parent?.key ?? c.key;
  const extensions = [
    basicConstraints(true, spec.pathLen),
    keyUsage(
      spec.pathLen === undefined ? [KU.keyCertSign, KU.cRLSign] : [KU.digitalSignature, KU.keyCertSign, KU.cRLSign],
    ),
    subjectKeyIdentifier(c.key.keyId),
    ...(parent === undefined ? [] : [authorityKeyIdentifier(parent.key.keyId)]),
    ...(spec.extKeyUsage === undefined ? [] : [extKeyUsage(spec.extKeyUsage)]),
    ...(parent === undefined
      ? []
      : [
          certificatePolicies(['2.5.29.32.0']),
          crlDistributionPoints(parent.links.crl),
          authorityInfoAccess(null, parent.links.caIssuers),
        ]),
  ];
  const signer = signerKey.signer(spec.hash);
  const tbs = tbsCertificate({
    serial: c.serial,
    signatureAlgorithm: signer.algorithm,
    issuer: parent?.subject ?? c.subject,
    notBefore: c.notBefore,
    notAfter: c.notAfter,
    subject: c.subject,
    spki: c.key.spki,
    extensions,
  });
  return signed(tbs, signer);
}
