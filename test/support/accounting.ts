// The books of one customer after a load or crash test: live certificates per order, the
// reconciliation's orphans, the credit used and what the ledger says is still charged.
import { AuditRepo, OrderCertificatesRepo, type Db } from '../../src/storage/index.js';
import { Reconciliation } from '../../src/ra/issuance/reconciliation.js';
import { systemClock } from '../../src/core/index.js';

export interface Books {
  /** For each of the customer's orders, how many of its certificates are not revoked. */
  readonly liveCertificatesPerOrder: number[];
  /** Certificates the reconciliation finds no order reaching (serials). */
  readonly orphans: string[];
  /** customers.used_minor. */
  readonly used: number;
  /** Charges minus refunds in the ledger. */
  readonly liveCharges: number;
}

export async function accountingOf(db: Db, customerId: number): Promise<Books> {
  const orders = await db.kysely.selectFrom('orders').select('id').where('customer_id', '=', customerId).execute();
  const live = await db.kysely
    .selectFrom('certificates')
    .select('order_id')
    .where('customer_id', '=', customerId)
    .where('revoked_at', 'is', null)
    .execute();
  const count = new Map<number, number>();
  for (const c of live) count.set(c.order_id!, (count.get(c.order_id!) ?? 0) + 1);
  // Revoking is not needed to list them: the CA is not consulted.
  const reconciliation = new Reconciliation({
    orderCertificates: new OrderCertificatesRepo(db),
    audit: new AuditRepo(db),
    clock: systemClock,
    ca: { revoke: () => Promise.reject(new Error('read only')) },
  });
  const orphans = (await reconciliation.orphans()).filter((o) => o.customerId === customerId).map((o) => o.serial);
  const customer = await db.kysely
    .selectFrom('customers')
    .select('used_minor')
    .where('id', '=', customerId)
    .executeTakeFirstOrThrow();
  const ledger = await db.kysely
    .selectFrom('ledger')
    .select(['kind', 'amount_minor'])
    .where('customer_id', '=', customerId)
    .execute();
  const liveCharges = ledger.reduce((sum, l) => sum + (l.kind === 'charge' ? l.amount_minor : -l.amount_minor), 0);
  return {
    liveCertificatesPerOrder: orders.map((o) => count.get(o.id) ?? 0),
    orphans,
    used: Number(customer.used_minor),
    liveCharges,
  };
}
