import type { CustomerId, ProductType, SignatureHashAlgorithm, ValidationLevel } from '../core/index.js';
import type { CheckedCsr } from './checks.js';
import type { OrganizationSubject } from './profiles.js';

/** What the RA asks a CA to certify. Names are the order's, already validated by the RA. */
export interface IssueRequest {
  /** The subscriber's request, checked by `checkCsr` (signature, key strength). */
  readonly csr: CheckedCsr;
  readonly product: { readonly code: string; readonly brand: string; readonly type: ProductType; readonly validationLevel: ValidationLevel | null };
  /** Picks the chain (spec 2.9); SHA256-FULL-CHAIN when absent. */
  readonly signatureHashAlgorithm?: SignatureHashAlgorithm;
  /** TLS: the DNS names (subjectAltName); the commonName defaults to the first. */
  readonly dnsNames?: readonly string[];
  readonly commonName?: string;
  /** S/MIME: the mailbox addresses. */
  readonly emails?: readonly string[];
  /** OV, EV and code signing: the vetted organization. */
  readonly organization?: OrganizationSubject;
  /** Latest end wanted (Unix seconds); the CA caps it by the lifetime allowed on the issue date. */
  readonly notAfter?: number;
  readonly orderId?: number;
  readonly customerId?: CustomerId;
  /** Who asked, for the audit log (`user:…`, `operator`, `system`). */
  readonly actor?: string;
}

/** A signed leaf in the shapes `Fulfillment` wants (DESIGN §5.7). */
export interface IssuedCertificate {
  /** Upper-case hex, as `openssl x509 -serial` prints it. */
  readonly serial: string;
  /** The signing CA key, which names its CRL (`/crl/<issuerId>.crl`). */
  readonly issuerId: string;
  /** PEM, ending in a newline. */
  readonly certificate: string;
  /** PEM of the intermediates, leaf side first, no root. */
  readonly intermediate: string;
  /** Certs-only PKCS#7 (leaf and intermediates) in PEM with the `PKCS7` label. */
  readonly pkcs7: string;
  readonly notBefore: number;
  readonly notAfter: number;
  readonly der: Uint8Array;
  /** CA certificate ids of the delivered chain, root last. */
  readonly chainIds: readonly string[];
}

export interface ChainInfo {
  readonly issuerId: string;
  readonly intermediates: readonly string[];
  readonly root: string;
  readonly chainIds: readonly string[];
}

export interface RevocationResult {
  readonly serial: string;
  readonly revokedAt: number;
  readonly reason: number | null;
  /** True when it had been revoked before (the first time and reason stand). */
  readonly alreadyRevoked: boolean;
}

/** RFC 5280 §5.3.1 CRLReason codes by name (7 is unused; CA-only reasons are not offered). */
export const REVOCATION_REASONS = {
  unspecified: 0, keyCompromise: 1, affiliationChanged: 3, superseded: 4, cessationOfOperation: 5, certificateHold: 6, privilegeWithdrawn: 9,
} as const;
export type RevocationReasonName = keyof typeof REVOCATION_REASONS;

/**
 * A certificate authority as the RA uses it. Small on purpose: an upstream ACME CA implements the
 * same calls (issue = finalize + download, revoke = revokeCert; its CRL and OCSP are its own).
 */
export interface Issuer {
  issue(request: IssueRequest): Promise<IssuedCertificate>;
  revoke(serial: string, reason: string, options?: { actor?: string; at?: number }): Promise<RevocationResult>;
  chain(brand: string, signatureHashAlgorithm: SignatureHashAlgorithm, type?: ProductType): ChainInfo;
  /** The current CRL of an issuing CA (DER); undefined when this issuer does not run it. */
  crl(issuerId: string): Promise<Uint8Array | undefined>;
  /** An OCSP response (DER) for an OCSP request (DER). */
  ocsp(request: Uint8Array): Promise<Uint8Array>;
}
