import { CertdeskError } from '../core/index.js';

/**
 * The issuance claim a signing was made under was no longer held when its certificate was about to
 * be recorded (the holder stalled past the claim, or the order's round ended). The certificate was
 * recorded revoked and must not be delivered: whoever holds the round now finishes it.
 */
export class IssuanceClaimLost extends CertdeskError {
  constructor(orderId: number) {
    super(
      'conflict',
      `the issuance of order ${orderId} was claimed by another process while this one signed: its certificate was recorded revoked`,
    );
  }
}
