import {
  CertdeskError,
  type CustomerId,
  type ProductType,
  type SignatureHashAlgorithm,
  type ValidationLevel,
} from '../core/index.js';
import type { Repositories } from '../storage/index.js';
import type { CheckedCsr } from './checks.js';
import type { OrganizationSubject } from './profiles.js';

/** What the RA asks a CA to certify. Names are the order's, already validated by the RA. */
export interface IssueRequest {
  /** The subscriber's request, checked by `checkCsr` (signature, key strength). */
  readonly csr: CheckedCsr;
  readonly product: {
    readonly code: string;
    readonly brand: string;
    readonly type: ProductType;
    readonly validationLevel: ValidationLevel | null;
  };
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
  /**
   * The order's issuance claim this signing is made under (the RA's, see `IssuanceRounds.issue`). The
   * certificate is recorded against the order only if the claim is still held when it is written;
   * otherwise it is recorded revoked (superseded) and `IssuanceClaimLost` is thrown.
   */
  readonly issuanceClaim?: string;
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

/**
 * What a revocation request recorded. `change` says what this call did: `revoked` (first
 * revocation), `escalated` (an earlier revocation's reason raised to keyCompromise, its time
 * kept) or `none` (it was revoked already and the request would not raise the reason: nothing
 * was written). `revokedAt` and `reason` are the recorded ones after the call (reason null =
 * unspecified, no reasonCode).
 */
export interface RevocationResult {
  readonly serial: string;
  readonly revokedAt: number;
  readonly reason: number | null;
  /** True when it had been revoked before this call (by an earlier or a concurrent one). */
  readonly alreadyRevoked: boolean;
  readonly change: 'revoked' | 'escalated' | 'none';
  /** The reason an escalation replaced (null = unspecified); absent unless `change` is `escalated`. */
  readonly previousReason?: number | null;
  /**
   * Why the CRL could not be re-signed after the revocation committed (absent when it was). The
   * revocation stands and OCSP says so; the hourly job re-signs the lagging CRL.
   */
  readonly crlFailure?: string;
}

/** RFC 5280 §5.3.1 CRLReason codes by name (7 is unused; CA-only reasons are not offered). */
export const REVOCATION_REASONS = {
  unspecified: 0,
  keyCompromise: 1,
  affiliationChanged: 3,
  superseded: 4,
  cessationOfOperation: 5,
  certificateHold: 6,
  privilegeWithdrawn: 9,
} as const;
export type RevocationReasonName = keyof typeof REVOCATION_REASONS;

/** The RFC 5280 code of a reason name; throws invalidInput (field RevokeReason) for any other name. */
export function revocationReasonCode(reasonName: string): number {
  const reason = REVOCATION_REASONS[reasonName as keyof typeof REVOCATION_REASONS];
  if (reason === undefined) {
    throw new CertdeskError(
      'invalidInput',
      `unknown revocation reason ${reasonName} (one of ${Object.keys(REVOCATION_REASONS).join(', ')})`,
      {
        field: 'RevokeReason',
      },
    );
  }
  return reason;
}

/** The name of a recorded reason code (null, no reasonCode, is `unspecified`). */
export function revocationReasonName(code: number | null): string {
  const found = Object.entries(REVOCATION_REASONS).find(([, c]) => c === (code ?? 0));
  return found === undefined ? `reason ${code}` : found[0];
}

/**
 * What every certificate authority can do, the built-in one and an upstream ACME CA alike
 * (issue = finalize + download, revoke = revokeCert). Small on purpose; whatever only some
 * issuers offer is an optional capability (`IssuerCapabilities`) that the RA asks for, after
 * step-ca's `cas/apiv1/services.go`.
 */
export interface Issuer {
  /**
   * Signs what the RA validated. With `issuanceClaim`, an issuer that records its certificates
   * (`recordsCertificates`) records this one only while the claim is held, else throws
   * `IssuanceClaimLost`; any other issuer's certificate is recorded by the RA under the same rule.
   */
  issue(request: IssueRequest): Promise<IssuedCertificate>;
  /**
   * Revokes a certificate, or raises an earlier revocation's reason to keyCompromise. A repeat
   * that would not raise the reason changes nothing and resolves with `change: 'none'`, so
   * callers that only need the certificate revoked can repeat it safely.
   */
  revoke(serial: string, reason: string, options?: RevokeOptions): Promise<RevocationResult>;
}

/** What `Issuer.revoke` takes besides the serial and the reason. */
export interface RevokeOptions {
  /** Who asked, for the audit events (default `system`). */
  readonly actor?: string;
  /** The revocation date (default now). */
  readonly at?: number;
  /**
   * The caller's own record of the revocation, made in the transaction that records it here when
   * it changes something (revoked, or escalated): both commit or neither does, so a revocation is
   * never made without the caller's record of it (DELETE /Revoke: the order revoked and refunded,
   * the audit event, the notice). A throw undoes the revocation. Run by the issuers that record
   * their revocations (`recordsCertificates`; the RA holds no other, see `recordingIssuer`).
   */
  readonly record?: (change: RevocationResult, repos: Repositories) => Promise<void>;
  /**
   * Run first in that transaction, before the certificate's row is written: the caller locks the
   * rows its `record` will change, so the transaction takes them in the order the caller's other
   * transactions do (an order's row before its certificates', as an issuance completes), and two
   * of them cannot deadlock on PostgreSQL.
   */
  readonly lock?: (repos: Repositories) => Promise<void>;
}

/** The capabilities an issuer may add to `Issuer`; the RA uses each only where it is offered. */
export interface IssuerCapabilities {
  /**
   * The issuer records every certificate it signs (the built-in CA: its CRL and OCSP answers read
   * those records) before answering. Without it the RA records what `issue` returns.
   */
  readonly recordsCertificates?: true;
  /** A certificate it issued in the shapes of `issue` again (it does not store the chain per leaf). */
  fulfillment?(serial: string): Promise<IssuedCertificate | undefined>;
  /** Its CA certificates marked distrusted (DESIGN §5.8), with the phase dates. */
  distrustMarks?(): Map<string, { phase1: number | null; phase2: number | null }>;
}

/** An issuer as the RA holds it: the core calls and whichever capabilities it offers. */
export type IssuerWithCapabilities = Issuer & IssuerCapabilities;
