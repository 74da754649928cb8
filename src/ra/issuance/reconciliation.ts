import type { Clock, CustomerId, OrderId } from '../../core/index.js';
import type { Issuer } from '../../ca/index.js';
import type { AuditRepo, OrderCertificatesRepo } from '../../storage/index.js';

/** A certificate signed for an order that no issuance round delivered and nobody revoked. */
export interface OrphanCertificate {
  readonly serial: string;
  readonly orderId: OrderId;
  readonly customerId: CustomerId;
  readonly createdAt: number;
  readonly notAfter: number;
}

/** The most orphans one run lists or revokes; a larger backlog is worked off by running again. */
const BATCH = 10_000;

/**
 * The reconciliation of signed certificates against order history (issue 8): every certificate
 * signed for an order must be its current one, one a recorded reissue superseded, or revoked. One
 * that is none of these (a twin of a double signing, a round abandoned half-way) is invisible to
 * its customer, who could not revoke it on a key compromise; the operator lists and revokes them.
 */
export class Reconciliation {
  constructor(
    private readonly deps: {
      readonly orderCertificates: Pick<OrderCertificatesRepo, 'orphanCertificates'>;
      readonly ca: Pick<Issuer, 'revoke'>;
      readonly audit: Pick<AuditRepo, 'append'>;
      readonly clock: Clock;
    },
  ) {}

  /** Certificates no order reaches, oldest first. Reads only. */
  orphans(): Promise<OrphanCertificate[]> {
    return this.deps.orderCertificates.orphanCertificates(BATCH);
  }

  /**
   * Revokes each orphan (reason superseded: its order holds or held another certificate for the
   * same request) and records who did it; returns the ones revoked. A certificate revoked by
   * someone else meanwhile is skipped.
   */
  async revokeOrphans(actor: string): Promise<OrphanCertificate[]> {
    const revoked: OrphanCertificate[] = [];
    for (const orphan of await this.orphans()) {
      const result = await this.deps.ca.revoke(orphan.serial, 'superseded', { actor });
      if (result.alreadyRevoked) continue;
      revoked.push(orphan);
      await this.deps.audit.append({
        at: this.deps.clock.nowSeconds(),
        customerId: orphan.customerId,
        actor,
        clientAddress: null,
        action: 'ca.orphan-revoked',
        subject: String(orphan.orderId),
        details: { serial: orphan.serial },
      });
    }
    return revoked;
  }
}
