// Operator commands for vouchers (spec §2.13; DESIGN §5.8).
import type { Command } from 'commander';
import { amountOf } from '../core/index.js';
import type { Vouchers } from '../ra/vouchers/vouchers.js';
import { maskedCode } from '../ra/vouchers/voucher-codes.js';
import { parseCustomer } from './args.js';
import { iso, print } from './print.js';

export type OpenVouchers = () => Promise<{ vouchers: Vouchers; close(): Promise<void> }>;

/** `voucher list --customer ID [--codes]`. */
export function addVoucherCommands(program: Command, open: OpenVouchers): void {
  const withVouchers = async <T>(fn: (v: Vouchers) => Promise<T>): Promise<T> => {
    const opened = await open();
    try {
      return await fn(opened.vouchers);
    } finally {
      await opened.close();
    }
  };

  program
    .command('voucher')
    .description('vouchers')
    .command('list')
    .description("a customer's vouchers, newest first, voided ones included; codes masked unless --codes")
    .requiredOption('--customer <id>', 'customer id')
    .option('--codes', 'print whole codes (anyone holding one can redeem it)')
    .option('--json', 'print one JSON object')
    .action(async (o: { customer: string; codes?: boolean; json?: boolean }) => {
      const customerId = parseCustomer(o.customer);
      const list = await withVouchers((v) => v.listForOperator(customerId));
      const shown = list.map(({ voucher: v, code }) => ({
        VoucherCode: o.codes === true ? code : maskedCode(code),
        Status: v.status,
        CreationDate: iso(v.createdAt),
        CreatedBy: v.createdBy,
        ProductCode: v.product.code,
        ServerCount: v.serverCount,
        SubjectAltNameCount: v.subjectAltNameCount,
        ValidityPeriod: v.validityPeriod,
        Price: amountOf(v.price),
        Currency: v.price.currency,
        PartnerOrderID: v.partnerOrderId,
        ...(v.redeemedAt === null ? {} : { RedeemDate: iso(v.redeemedAt), ServiceOrderID: v.orderId }),
        ...(v.voidedAt === null ? {} : { VoidDate: iso(v.voidedAt) }),
      }));
      print(
        o.json === true,
        { Vouchers: shown },
        shown
          .map(
            (v) =>
              `${v.VoucherCode}\t${v.Status}\t${v.CreationDate}\t${v.ProductCode}\t${v.Price} ${v.Currency}\t${v.PartnerOrderID}\t${v.ServiceOrderID ?? '-'}`,
          )
          .join('\n'),
      );
    });
}
