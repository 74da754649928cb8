import { CertdeskError, type Clock } from '../core/index.js';
import type { CaRepo, Repositories } from '../storage/index.js';
import { fromPem } from './der-writer.js';
import { IssuanceClaimLost } from './issuance-claim.js';
import {
  REVOCATION_REASONS,
  revocationReasonCode,
  type IssueRequest,
  type IssuedCertificate,
  type Issuer,
  type IssuerWithCapabilities,
  type RevocationResult,
  type RevokeOptions,
} from './issuer.js';

export interface RecordingIssuerDeps {
  readonly repo: Pick<CaRepo, 'leafBySerial' | 'leafRecord'>;
  /** Runs `fn` in one transaction with every repository bound to it. */
  readonly transact: <T>(fn: (repos: Repositories) => Promise<T>) => Promise<T>;
  readonly clock: Clock;
}

/**
 * The issuer the RA holds. An issuer that records its own certificates (the built-in CA) is used as
 * it is. Any other — one offering only `issue` and `revoke`, as an upstream CA does — is wrapped so
 * that its certificates and revocations are recorded here by the same rules: a certificate under
 * its order's issuance claim (recorded revoked and refused when the claim was lost), a revocation
 * once, a reason raised only to keyCompromise; and a certificate's Fulfillment is served from that
 * record.
 */
export function recordingIssuer(issuer: IssuerWithCapabilities, deps: RecordingIssuerDeps): IssuerWithCapabilities {
  return issuer.recordsCertificates === true ? issuer : new RecordingIssuer(issuer, deps);
}

class RecordingIssuer implements IssuerWithCapabilities {
  readonly recordsCertificates = true as const;

  constructor(
    private readonly inner: Issuer & { distrustMarks?: IssuerWithCapabilities['distrustMarks'] },
    private readonly deps: RecordingIssuerDeps,
  ) {}

  async issue(request: IssueRequest): Promise<IssuedCertificate> {
    const issued = await this.inner.issue(request);
    const now = this.deps.clock.nowSeconds();
    const [lost] = await this.deps.transact(({ ca }) =>
      ca.recordLeavesUnderClaims(
        [
          {
            claim: request.issuanceClaim,
            leaf: {
              order_id: request.orderId ?? null,
              customer_id: request.customerId ?? null,
              issuer_id: issued.issuerId,
              key_id: null,
              serial: issued.serial,
              pem: issued.certificate,
              chain_pem: issued.intermediate,
              pkcs7_pem: issued.pkcs7,
              not_before: issued.notBefore,
              not_after: issued.notAfter,
              created_at: now,
              chain_ids: issued.chainIds.length === 0 ? null : issued.chainIds.join(','),
              profile: null,
            },
          },
        ],
        now,
      ),
    );
    if (lost === true) {
      // Recorded revoked here; the issuer that signed it must hear of it too.
      await this.inner.revoke(issued.serial, 'superseded');
      throw new IssuanceClaimLost(request.orderId ?? 0);
    }
    return issued;
  }

  async revoke(serial: string, reasonName: string, options: RevokeOptions = {}): Promise<RevocationResult> {
    const reason = revocationReasonCode(reasonName);
    const leaf = await this.deps.repo.leafBySerial(serial);
    if (leaf === undefined)
      throw new CertdeskError('notFound', `no certificate with serial ${serial} was recorded here`);
    const { record, lock, ...upstream } = options;
    const at = options.at ?? this.deps.clock.nowSeconds();
    const code = reason === 0 ? null : reason;
    // The issuer first: a revocation recorded here but not made upstream would be a lie. Should
    // the record below fail, a repeat finds nothing recorded and asks the issuer again (a repeat
    // it answers as a no-op), then records.
    if (leaf.revokedAt === null || (reason === REVOCATION_REASONS.keyCompromise && leaf.reason !== reason))
      await this.inner.revoke(serial, reasonName, upstream);
    // The record here and the caller's record of it commit together (`RevokeOptions.record`).
    return this.deps.transact(async (repos): Promise<RevocationResult> => {
      await lock?.(repos);
      let change: RevocationResult;
      if (await repos.ca.revoke(leaf.id, at, code)) {
        change = { serial, revokedAt: at, reason: code, alreadyRevoked: false, change: 'revoked' };
      } else {
        const current = (await repos.ca.leafBySerial(serial))!;
        if (reason !== REVOCATION_REASONS.keyCompromise || !(await repos.ca.escalateToKeyCompromise(leaf.id)))
          return {
            serial,
            revokedAt: current.revokedAt ?? at,
            reason: current.reason,
            alreadyRevoked: true,
            change: 'none',
          };
        change = {
          serial,
          revokedAt: current.revokedAt ?? at,
          reason,
          alreadyRevoked: true,
          change: 'escalated',
          previousReason: current.reason,
        };
      }
      await record?.(change, repos);
      return change;
    });
  }

  async fulfillment(serial: string): Promise<IssuedCertificate | undefined> {
    const row = await this.deps.repo.leafRecord(serial);
    if (row === undefined) return undefined;
    return {
      serial: row.serial,
      issuerId: row.keyId ?? '',
      certificate: row.pem,
      intermediate: row.chainPem,
      pkcs7: row.pkcs7Pem,
      notBefore: row.notBefore,
      notAfter: row.notAfter,
      der: fromPem(row.pem, 'CERTIFICATE'),
      chainIds: row.chainIds === null ? [] : row.chainIds.split(','),
    };
  }

  distrustMarks(): Map<string, { phase1: number | null; phase2: number | null }> {
    return this.inner.distrustMarks?.() ?? NO_MARKS;
  }
}

/** The marks of an issuer that keeps none: always the same (empty) Map. */
const NO_MARKS = new Map<string, { phase1: number | null; phase2: number | null }>();
