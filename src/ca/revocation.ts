import { CertdeskError, customerId as toCustomerId, type Clock } from '../core/index.js';
import type { AuditEvent, AuditRepo, CaRepo, LeafStatus, Repositories } from '../storage/index.js';
import {
  REVOCATION_REASONS,
  revocationReasonCode,
  revocationReasonName,
  type RevocationResult,
  type RevokeOptions,
} from './issuer.js';

/** What revoking a leaf of the built-in CA touches. */
export interface RevocationDeps {
  readonly repo: Pick<CaRepo, 'leafBySerial' | 'dropOcspResponses'>;
  readonly audit: Pick<AuditRepo, 'appendMany'>;
  readonly clock: Clock;
  readonly transact: <T>(
    fn: (tx: {
      repo: Pick<CaRepo, 'revoke' | 'escalateToKeyCompromise' | 'dropOcspResponses' | 'leafBySerial'>;
      audit: Pick<AuditRepo, 'appendMany'>;
      /** Every repository on the same transaction, for the caller's record (`RevokeOptions.record`). */
      repos: Repositories;
    }) => Promise<T>,
  ) => Promise<T>;
  /** Re-signs the CRL of the key that issued the leaf. */
  readonly refreshCrl: (keyId: string) => Promise<unknown>;
  /** Forgets the OCSP answers held in memory, in every process (resolves once the news is out). */
  readonly forgetOcsp?: () => Promise<void>;
}

/**
 * Revokes a leaf by serial: records time and reason once, drops its cached OCSP responses and
 * regenerates its issuer's CRL (a failure of that last step is reported in `crlFailure`, not
 * thrown), with an audit event and the caller's record (`options.record`) committed with the
 * change and an audit event after the CRL. A revoked leaf's reason may still be raised to
 * keyCompromise (an escalation, below);
 * any other repeat writes nothing and resolves with `change: 'none'`. Throws invalidInput for
 * an unknown reason name and notFound for a serial this CA did not issue.
 */
export async function revokeLeaf(
  o: RevocationDeps,
  serial: string,
  reasonName: string,
  options: RevokeOptions = {},
): Promise<RevocationResult> {
  const reason = revocationReasonCode(reasonName);
  const normalized = serial.replace(/^0x/i, '').replace(/:/g, '').toUpperCase();
  const leaf = await o.repo.leafBySerial(normalized);
  if (leaf === undefined || leaf.keyId === null)
    throw new CertdeskError('notFound', `no certificate with serial ${normalized} was issued here`);
  const keyId = leaf.keyId;
  const code = reason === 0 ? null : reason;
  const unchanged = (current: LeafStatus | undefined): RevocationResult => ({
    serial: normalized,
    revokedAt: current?.revokedAt ?? leaf.revokedAt ?? 0,
    reason: current?.reason ?? null,
    alreadyRevoked: true,
    change: 'none',
  });
  // BR §7.2.2 (CRLReasons): with evidence of Key Compromise for a certificate whose CRL entry has
  // no reasonCode or a non-keyCompromise one, the CA SHOULD update the entry to keyCompromise.
  // Nothing else may replace a recorded reason, so other repeats write nothing.
  const escalates = (current: LeafStatus) =>
    reason === REVOCATION_REASONS.keyCompromise && current.reason !== REVOCATION_REASONS.keyCompromise;
  if (leaf.revokedAt !== null && !escalates(leaf)) return unchanged(leaf);

  const at = options.at ?? o.clock.nowSeconds();
  const actor = options.actor ?? 'system';
  const owner = leaf.customerId === null ? null : toCustomerId(leaf.customerId);
  const event = (action: string, details: Record<string, unknown>): AuditEvent => ({
    at,
    customerId: owner,
    actor,
    clientAddress: null,
    action,
    subject: normalized,
    details,
  });
  // One transaction per outcome: the guarded update, the OCSP cache drop, the audit event and the
  // caller's record commit together, so a request that changes nothing (a lost race included)
  // leaves no trace, and a revocation whose record fails is not made.
  const outcome = await o.transact(async (tx): Promise<RevocationResult | undefined> => {
    await options.lock?.(tx.repos);
    if (await tx.repo.revoke(leaf.id, at, code)) {
      await tx.repo.dropOcspResponses(keyId, normalized);
      await tx.audit.appendMany([event('ca.revoke.begin', { reason: reasonName })]);
      const revoked: RevocationResult = {
        serial: normalized,
        revokedAt: at,
        reason: code,
        alreadyRevoked: false,
        change: 'revoked',
      };
      await options.record?.(revoked, tx.repos);
      return revoked;
    }
    // Revoked before (or by a concurrent request): an escalation keeps the first revocation
    // date. BR §7.2.2 (note to revokedCertificates) moves revocationDate only earlier, when the
    // CA determines the key was compromised before it; a request brings no such date, and a
    // later date would misstate when the certificate stopped being trusted.
    const before = await tx.repo.leafBySerial(normalized);
    if (before === undefined || before.revokedAt === null || !escalates(before)) return undefined;
    if (!(await tx.repo.escalateToKeyCompromise(leaf.id))) return undefined;
    await tx.repo.dropOcspResponses(keyId, normalized);
    await tx.audit.appendMany([
      event('ca.revoke.begin', {
        reason: reasonName,
        previousReason: revocationReasonName(before.reason),
        revokedAt: before.revokedAt,
      }),
    ]);
    const escalated: RevocationResult = {
      serial: normalized,
      revokedAt: before.revokedAt,
      reason: REVOCATION_REASONS.keyCompromise,
      alreadyRevoked: true,
      change: 'escalated',
      previousReason: before.reason,
    };
    await options.record?.(escalated, tx.repos);
    return escalated;
  });
  if (outcome === undefined) return unchanged(await o.repo.leafBySerial(normalized));
  // The revocation is committed: it stands even if the CRL cannot be signed now. Its OCSP answers
  // are dropped below all the same, the failure is reported in the result and the audit event,
  // and the periodic job re-signs the lagging CRL (`crlLags`).
  const crlFailure = await o.refreshCrl(keyId).then(
    () => undefined,
    (e: unknown) => (e instanceof Error ? e.message : String(e)),
  );
  // An OCSP answer signed from the row as it was before the commit may have been cached after
  // the drop above; drop again now that the CRL is out, so such an answer cannot outlive it.
  await o.repo.dropOcspResponses(keyId, normalized);
  // The same for the answers held in memory, here and in every other process.
  await o.forgetOcsp?.();
  await o.audit.appendMany([
    event('ca.revoke.done', {
      reason: reasonName,
      keyId,
      ...(outcome.change === 'escalated' ? { escalated: true } : {}),
      ...(crlFailure === undefined ? {} : { crlFailure }),
    }),
  ]);
  return crlFailure === undefined ? outcome : { ...outcome, crlFailure };
}
