// Checks of the certificate chain a server sent: name (RFC 6125), validity against the service's
// clock, key, signature algorithm, trust (a path to a root of node's store or the caller's roots),
// completeness and order, and whether the leaf is the order's certificate.
import { X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import { rootCertificates } from 'node:tls';
import { children, expectTag, oidText, readTlv, TAG } from '../core/der.js';
import type { CertificateResult } from './types.js';

export interface CertificateInput {
  /** DER certificates in the order the server sent them, leaf first. */
  readonly chain: readonly Buffer[];
  readonly ocspStapled: boolean;
  /** The order of `chain` is the server's (raw TLS ≤ 1.2 probe) rather than rebuilt by node:tls. */
  readonly orderAsSent: boolean;
}

export interface CertificateCheckOptions {
  readonly name: string;
  readonly now: number;
  readonly trustedRoots: readonly string[];
  readonly orderCertificatePem?: string;
  /** Fetches the issuer a certificate names in its AIA caIssuers URL (undefined: not found or not allowed). */
  readonly fetchIssuer: (url: string) => Promise<Buffer | undefined>;
}

let systemRoots: X509Certificate[] | undefined;

/** The checks of one served chain. Throws only if the leaf is not a certificate at all. */
export async function checkCertificate(
  input: CertificateInput,
  o: CertificateCheckOptions,
): Promise<CertificateResult> {
  const chain = input.chain.map((der) => new X509Certificate(der));
  const leaf = chain[0]!;
  systemRoots ??= rootCertificates.map((p) => new X509Certificate(p));
  const anchors = [...systemRoots, ...o.trustedRoots.map((p) => new X509Certificate(p))];
  const path = await buildPath(chain, anchors, o.fetchIssuer);
  const notBefore = seconds(leaf.validFrom);
  const notAfter = seconds(leaf.validTo);
  const key = keyOf(leaf);
  const order = o.orderCertificatePem === undefined ? null : new X509Certificate(o.orderCertificatePem);
  return {
    chainPem: chain.map((c) => c.toString()),
    subject: leaf.subject,
    issuer: leaf.issuer,
    notBefore,
    notAfter,
    expired: o.now > notAfter,
    matchesName: matchesName(leaf, o.name),
    trusted: path.trusted,
    chainComplete: path.complete,
    chainInOrder: !input.orderAsSent || chain.every((c, i) => i === 0 || issuedBy(chain[i - 1]!, c)),
    keyType: key.type,
    keyBits: key.bits,
    signatureAlgorithm: signatureAlgorithm(leaf.raw),
    isOrderCertificate: order === null ? null : order.raw.equals(leaf.raw),
    ocspStapled: input.ocspStapled,
  };
}

/** RFC 6125 as browsers apply it: subjectAltName only (never the CN), a wildcard only as the whole left-most label. */
function matchesName(leaf: X509Certificate, name: string): boolean {
  if (isIP(name) !== 0) return leaf.checkIP(name) !== undefined;
  return (
    leaf.checkHost(name, {
      subject: 'never',
      wildcards: true,
      partialWildcards: false,
      multiLabelWildcards: false,
      singleLabelSubdomains: false,
    }) !== undefined
  );
}

function issuedBy(child: X509Certificate, parent: X509Certificate): boolean {
  try {
    return child.checkIssued(parent) && child.verify(parent.publicKey);
  } catch {
    return false;
  }
}

/**
 * Walks from the leaf to a trust anchor through the sent certificates; a missing link is fetched
 * from the caIssuers URL (as browsers do) and makes the chain incomplete. Complete: no link was
 * missing and the walk ended at an anchor or a self-signed certificate.
 */
async function buildPath(
  chain: readonly X509Certificate[],
  anchors: readonly X509Certificate[],
  fetchIssuer: (url: string) => Promise<Buffer | undefined>,
): Promise<{ trusted: boolean; complete: boolean }> {
  let current = chain[0]!;
  let complete = true;
  const used = new Set<X509Certificate>([current]);
  for (let depth = 0; depth < 8; depth++) {
    if (anchors.some((a) => a.fingerprint256 === current.fingerprint256)) return { trusted: true, complete };
    if (anchors.some((a) => issuedBy(current, a))) return { trusted: true, complete };
    const sent = chain.find((c) => !used.has(c) && issuedBy(current, c));
    if (sent !== undefined) {
      used.add(sent);
      current = sent;
      continue;
    }
    if (issuedBy(current, current)) return { trusted: false, complete };
    complete = false;
    const url = /CA Issuers - URI:(\S+)/.exec(current.infoAccess ?? '')?.[1];
    const der = url === undefined ? undefined : await fetchIssuer(url).catch(() => undefined);
    const fetched = der === undefined ? undefined : parseCertificate(der);
    if (fetched === undefined || !issuedBy(current, fetched)) return { trusted: false, complete };
    current = fetched;
  }
  return { trusted: false, complete };
}

function parseCertificate(data: Buffer): X509Certificate | undefined {
  try {
    return new X509Certificate(data);
  } catch {
    return undefined;
  }
}

const CURVE_BITS: Record<string, number> = { prime256v1: 256, secp384r1: 384, secp521r1: 521, secp224r1: 224 };

function keyOf(cert: X509Certificate): { type: CertificateResult['keyType']; bits: number } {
  const key = cert.publicKey;
  const details = key.asymmetricKeyDetails ?? {};
  if (key.asymmetricKeyType === 'rsa' || key.asymmetricKeyType === 'rsa-pss')
    return { type: 'RSA', bits: details.modulusLength ?? 0 };
  if (key.asymmetricKeyType === 'ec') return { type: 'EC', bits: CURVE_BITS[details.namedCurve ?? ''] ?? 0 };
  return {
    type: 'other',
    bits: key.asymmetricKeyType === 'ed25519' ? 256 : key.asymmetricKeyType === 'ed448' ? 456 : 0,
  };
}

const SIGNATURE_OIDS: Record<string, string> = {
  '1.2.840.113549.1.1.4': 'md5WithRSAEncryption',
  '1.2.840.113549.1.1.5': 'sha1WithRSAEncryption',
  '1.2.840.113549.1.1.10': 'rsassaPss',
  '1.2.840.113549.1.1.11': 'sha256WithRSAEncryption',
  '1.2.840.113549.1.1.12': 'sha384WithRSAEncryption',
  '1.2.840.113549.1.1.13': 'sha512WithRSAEncryption',
  '1.2.840.10045.4.1': 'ecdsa-with-SHA1',
  '1.2.840.10045.4.3.2': 'ecdsa-with-SHA256',
  '1.2.840.10045.4.3.3': 'ecdsa-with-SHA384',
  '1.2.840.10045.4.3.4': 'ecdsa-with-SHA512',
  '1.3.101.112': 'ED25519',
  '1.3.101.113': 'ED448',
};

/** The certificate's signatureAlgorithm (RFC 5280 §4.1.1.2), by OpenSSL's name, or the OID when unknown. */
function signatureAlgorithm(der: Buffer): string {
  try {
    const cert = expectTag(readTlv(der, 0), TAG.SEQUENCE);
    const algorithm = expectTag(children(der, cert)[1], TAG.SEQUENCE);
    const oid = oidText(der, expectTag(children(der, algorithm)[0], TAG.OID));
    return SIGNATURE_OIDS[oid] ?? oid;
  } catch {
    return 'unknown';
  }
}

function seconds(opensslDate: string): number {
  return Math.floor(Date.parse(opensslDate) / 1000);
}
