// A certificate signed and recorded for an order outside its issuance round: what a holder that
// died, stalled or lost its claim leaves behind, for the tests of rounds, reads and the reconciliation.
import { checkCsr, type IssuedCertificate } from '../../src/ca/index.js';
import type { CustomerId, OrderId } from '../../src/core/index.js';
import type { Services } from '../../src/main.js';
import { testCsr } from './csr.js';

/** Signs a TrustPoint.DV certificate for `order` (for `names`; under `claim` when given) and records it, undelivered. */
export function signForOrder(
  services: Pick<Services, 'ca' | 'catalog'>,
  order: { id: OrderId; customerId: CustomerId },
  o: { claim?: string; names?: string[] } = {},
): Promise<IssuedCertificate> {
  const product = services.catalog.product('TrustPoint.DV');
  return services.ca.issue({
    csr: checkCsr(testCsr().pem),
    product: { code: product.code, brand: product.brand, type: product.type, validationLevel: product.validationLevel },
    dnsNames: o.names ?? ['www.certdesk-test.com', 'certdesk-test.com'],
    orderId: order.id,
    customerId: order.customerId,
    ...(o.claim === undefined ? {} : { issuanceClaim: o.claim }),
  });
}
