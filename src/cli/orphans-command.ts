// `ca orphans`: the reconciliation of signed certificates against their orders (issue 8).
import type { Command } from 'commander';
import { iso, print } from './print.js';
import type { OrphanCertificate, Reconciliation } from '../ra/issuance/reconciliation.js';

export type OpenReconciliation = () => Promise<{ reconciliation: Reconciliation; close(): Promise<void> }>;

/**
 * `ca orphans [--revoke] [--json]`: lists the certificates signed for an order that no issuance
 * delivered and nobody revoked; with --revoke, revokes them (reason superseded). Exits 0 either
 * way; the list is empty on a healthy system.
 */
export function addOrphansCommand(ca: Command, open: OpenReconciliation): void {
  ca.command('orphans')
    .description('list certificates no order reaches (signed, never delivered, not revoked); --revoke revokes them')
    .option('--revoke', 'revoke every one listed (reason superseded)')
    .option('--json', 'print one JSON object')
    .action(async (o: { revoke?: boolean; json?: boolean }) => {
      const opened = await open();
      let found: OrphanCertificate[];
      try {
        found =
          o.revoke === true
            ? await opened.reconciliation.revokeOrphans('operator')
            : await opened.reconciliation.orphans();
      } finally {
        await opened.close();
      }
      const rows = found.map((x) => ({
        Serial: x.serial,
        ServiceOrderID: x.orderId,
        CustomerID: x.customerId,
        Created: iso(x.createdAt),
        NotAfter: iso(x.notAfter),
      }));
      const verb = o.revoke === true ? 'revoked' : 'found';
      const text =
        rows.length === 0
          ? `no orphan certificates ${verb}`
          : [
              `${rows.length} orphan certificate(s) ${verb}:`,
              ...rows.map(
                (r) => `${r.Serial}\torder ${r.ServiceOrderID}\tcustomer ${r.CustomerID}\tsigned ${r.Created}`,
              ),
            ].join('\n');
      print(o.json === true, { Orphans: rows, Revoked: o.revoke === true }, text);
    });
}
