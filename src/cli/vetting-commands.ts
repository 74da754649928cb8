// Operator commands for organization vetting of OV and EV orders (DESIGN §4).
import type { Command } from 'commander';
import { iso, lines, print } from './print.js';
import { parsePositive } from './args.js';
import type { Vetting } from '../ra/orders/vetting.js';

export type OpenVetting = () => Promise<{ vetting: Vetting; close(): Promise<void> }>;

/** `vetting list`, `vetting approve ID [EV data]`, `vetting reject ID --reason R`. */
export function addVettingCommands(program: Command, open: OpenVetting): void {
  const vetting = program.command('vetting').description('organization vetting of OV and EV orders');
  const withVetting = async <T>(fn: (v: Vetting) => Promise<T>): Promise<T> => {
    const opened = await open();
    try {
      return await fn(opened.vetting);
    } finally {
      await opened.close();
    }
  };

  vetting
    .command('list')
    .description('orders waiting for vetting, oldest first')
    .option('--json', 'print one JSON object')
    .action(async (o: { json?: boolean }) => {
      const rows = await withVetting((v) => v.list());
      const out = rows.map(({ order, names }) => ({
        ServiceOrderID: order.id,
        CustomerID: order.customerId,
        ProductCode: order.productCode,
        ValidationLevel: order.validationLevel,
        OrganizationName: order.organization?.OrganizationName ?? '',
        Country: order.organization?.OrganizationAddress?.Country ?? '',
        Names: names.map((n) => n.name),
        OrderDate: iso(order.orderDate),
      }));
      print(
        o.json === true,
        { Orders: out },
        out.length === 0
          ? 'no order is waiting for vetting'
          : out
              .map(
                (r) =>
                  `${r.ServiceOrderID}\t${r.ProductCode}\t${r.OrganizationName} (${r.Country})\t${r.Names.join(',')}`,
              )
              .join('\n'),
      );
    });

  vetting
    .command('approve')
    .description('approve the organization of an order and issue its certificate')
    .argument('<id>', 'ServiceOrderID')
    .option(
      '--business-category <c>',
      'EV: Private Organization, Government Entity, Business Entity or Non-Commercial Entity',
    )
    .option('--registration-number <n>', 'EV: registration number at the registry')
    .option('--jurisdiction-country <cc>', 'EV: country of incorporation (ISO 3166)')
    .option('--jurisdiction-state <s>', 'EV: state or province of incorporation, where it applies')
    .option('--jurisdiction-locality <l>', 'EV: locality of incorporation, where it applies')
    .option('--json', 'print one JSON object')
    .action(
      async (
        id: string,
        o: {
          businessCategory?: string;
          registrationNumber?: string;
          jurisdictionCountry?: string;
          jurisdictionState?: string;
          jurisdictionLocality?: string;
          json?: boolean;
        },
      ) => {
        const orderId = parsePositive(id, 'order id');
        const order = await withVetting((v) =>
          v.approve(orderId, {
            ...(o.businessCategory === undefined ? {} : { BusinessCategory: o.businessCategory }),
            ...(o.registrationNumber === undefined ? {} : { RegistrationNumber: o.registrationNumber }),
            ...(o.jurisdictionCountry === undefined ? {} : { JurisdictionCountry: o.jurisdictionCountry }),
            ...(o.jurisdictionState === undefined ? {} : { JurisdictionState: o.jurisdictionState }),
            ...(o.jurisdictionLocality === undefined ? {} : { JurisdictionLocality: o.jurisdictionLocality }),
          }),
        );
        const out = { ServiceOrderID: order.id, MajorStatus: order.majorStatus, MinorStatus: order.minorStatus };
        print(o.json === true, out, lines(out));
      },
    );

  vetting
    .command('reject')
    .description('reject the organization of an order: it FAILs (REJECTED) and is refunded')
    .argument('<id>', 'ServiceOrderID')
    .requiredOption('--reason <text>', 'why (recorded and shown to the operator)')
    .option('--json', 'print one JSON object')
    .action(async (id: string, o: { reason: string; json?: boolean }) => {
      const orderId = parsePositive(id, 'order id');
      const order = await withVetting((v) => v.reject(orderId, o.reason));
      const out = { ServiceOrderID: order.id, MajorStatus: order.majorStatus, MinorStatus: order.minorStatus };
      print(o.json === true, out, lines(out));
    });
}
