// A million orders of one customer, written straight into the database through Kysely (batched
// multi-row INSERTs in a few transactions), for the GET /Orders and GET /ModifiedOrders targets.
// The rows look like the ones POST /Order writes (src/ra/orders/orders.ts): DV products of both brands,
// two names each (the common name and its www twin), the JSON columns at their usual size, the
// CSR kept; mostly COMPLETE, some PENDING (the last 30 days only), FAILED, CANCELLED, REVOKED.
// Order dates run over two years up to now; update_date lies after order_date by the time the
// order took (issuance, expiry of DCV, revocation), so it is spread over time and not in id order.
import { createHash } from 'node:crypto';
import type { Db } from '../src/storage/index.js';
import { formatTimestamp } from '../src/core/index.js';

/** How many orders setup `orders1m` seeds. */
export const BENCH_ORDERS = 1_000_000;
/** How many orders setup `orders10k` seeds: the size the 1M-order latencies are compared with. */
export const BENCH_ORDERS_SMALL = 10_000;
/** The seeded order whose CommonName the pattern searches look for: the same one at both sizes. */
const PROBE_INDEX = 4320;

const DAY = 86_400;
const SPAN = 2 * 365 * DAY;
/** 29 columns per order row: 1,000 rows stay under SQLite's 32,766 bound parameters. */
const ORDER_BATCH = 1000;
/** Orders per transaction (a few transactions: the WAL is checkpointed between them). */
const ORDERS_PER_TRANSACTION = 100_000;

const WORDS = [
  'shop',
  'mail',
  'portal',
  'cloud',
  'api',
  'app',
  'store',
  'blog',
  'media',
  'secure',
  'data',
  'web',
  'my',
  'pay',
  'travel',
  'news',
];
const TLDS = ['com', 'de', 'net', 'eu', 'org', 'io', 'fr', 'nl'];
const PRODUCTS = [
  // code, brand, months or days, unit, price (EUR minor), share in %
  { code: 'TrustPoint.DV', brand: 'TrustPoint', period: 12, priceMinor: 4900, share: 40 },
  { code: 'TrustPoint.FreeDV', brand: 'TrustPoint', period: 180, priceMinor: 0, share: 25 },
  { code: 'Sectra.DV', brand: 'Sectra', period: 12, priceMinor: 3900, share: 15 },
  { code: 'TrustPoint.DV', brand: 'TrustPoint', period: 24, priceMinor: 9800, share: 10 },
  { code: 'Sectra.DV', brand: 'Sectra', period: 24, priceMinor: 7800, share: 10 },
] as const;
const METHODS = ['DNS', 'DNS', 'DNS', 'DNS', 'DNS', 'FILE', 'FILE', 'EMAIL', 'EMAIL', 'EMAIL'] as const;

/** mulberry32: a small deterministic generator (the same data every run). */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const hex = (text: string) => createHash('sha256').update(text).digest('hex');

export interface Seeded {
  readonly orders: number;
  readonly names: number;
  /** The CommonName of the order PROBE_INDEX (the same at every size: the data are deterministic). */
  readonly probeCommonName: string;
}

export async function seedOrders(
  db: Db,
  o: { customerId: number; count: number; now: number; csrPem: string },
): Promise<Seeded> {
  const rnd = random(0x5eed);
  const last = await db.kysely
    .selectFrom('orders')
    .select((e) => e.fn.max('id').as('id'))
    .executeTakeFirst();
  const firstId = Number(last?.id ?? 0) + 1;
  const start = o.now - SPAN;
  const contacts = JSON.stringify({
    AdminContact: {
      FirstName: 'Ada',
      LastName: 'Lovelace',
      Phone: '+49 30 1234567',
      Email: 'ada@bench-customer.example',
    },
    TechContact: {
      FirstName: 'Charles',
      LastName: 'Babbage',
      Phone: '+49 30 7654321',
      Email: 'ops@bench-customer.example',
    },
  });
  let names = 0;
  let probeCommonName = '';

  for (let txStart = 0; txStart < o.count; txStart += ORDERS_PER_TRANSACTION) {
    await db.kysely.transaction().execute(async (tx) => {
      const txEnd = Math.min(o.count, txStart + ORDERS_PER_TRANSACTION);
      for (let batchStart = txStart; batchStart < txEnd; batchStart += ORDER_BATCH) {
        const orderRows = [];
        const nameRows = [];
        for (let i = batchStart; i < Math.min(txEnd, batchStart + ORDER_BATCH); i++) {
          const id = firstId + i;
          const r = rnd();
          let acc = 0;
          const product = PRODUCTS.find((p) => (acc += p.share) > r * 100) ?? PRODUCTS[0];
          const method = METHODS[Math.floor(rnd() * METHODS.length)]!;
          const base = `${WORDS[i % WORDS.length]!}-${i.toString(36)}.${TLDS[Math.floor(rnd() * TLDS.length)]!}`;
          const commonName = `www.${base}`;
          if (i === PROBE_INDEX) probeCommonName = commonName;
          const orderDate = start + Math.floor((i * SPAN) / o.count) + Math.floor(rnd() * 60);
          const fate = rnd() * 100;
          const recent = o.now - orderDate < 30 * DAY;
          let major: string;
          let minor: string;
          let updateDate: number;
          let issuedAt: number | null = null;
          let billing = 'cleared';
          let failure: string | null = null;
          if (recent && fate < 8) {
            major = 'PENDING';
            minor = method === 'DNS' ? 'WF_DNS_AUTH' : method === 'FILE' ? 'WF_FILE_AUTH' : 'WF_EMAIL_AUTH';
            updateDate = orderDate + Math.floor(rnd() * 3600);
            billing = 'uncleared';
          } else if (fate < 4) {
            major = 'FAILED';
            minor = 'DCV_EXPIRED';
            updateDate = orderDate + 30 * DAY;
            billing = 'refunded';
            failure = `not validated within 30 days: ${commonName}, ${base}`;
          } else if (fate < 6) {
            major = 'CANCELLED';
            minor = 'CANCELLED';
            updateDate = orderDate + Math.floor(rnd() * 2 * DAY);
            billing = 'refunded';
          } else if (fate < 8) {
            major = 'REVOKED';
            minor = 'REVOKED';
            issuedAt = orderDate + 30 + Math.floor(rnd() * 3600);
            updateDate = issuedAt + Math.floor(rnd() * 200 * DAY);
          } else {
            major = 'COMPLETE';
            minor = 'COMPLETED';
            issuedAt = orderDate + 5 + Math.floor(rnd() * (method === 'EMAIL' ? DAY : 3600));
            updateDate = issuedAt;
          }
          updateDate = Math.min(updateDate, o.now);
          if (issuedAt !== null) issuedAt = Math.min(issuedAt, updateDate);
          const partnerOrderId = `cd-${hex(`p${id}`).slice(0, 20)}`;
          const validated = issuedAt !== null;
          orderRows.push({
            id,
            customer_id: o.customerId,
            partner_order_id: partnerOrderId,
            request_hash: hex(`r${id}`),
            product_code: product.code,
            product_type: 'SSL',
            ca_brand: product.brand,
            validation_level: 'DV',
            common_name: commonName,
            major_status: major,
            minor_status: minor,
            dv_auth_method: method,
            signature_hash_algorithm: 'SHA256-FULL-CHAIN',
            validity_period: product.period,
            server_count: 1,
            san_names: JSON.stringify([base]),
            params_json: JSON.stringify({
              ProductCode: product.code,
              ValidityPeriod: product.period,
              ServerCount: 1,
              SubjectAltNames: [],
              SubjectAltNameCount: 0,
              DVAuthMethod: method,
              SignatureHashAlgorithm: 'SHA256-FULL-CHAIN',
              InstallationService: false,
              ExpediteIssuance: false,
              IsRenewal: false,
              IsCompetitiveUpgrade: false,
              IsUpsell: false,
              ...(method === 'EMAIL'
                ? {
                    ApproverEmail: `admin@${base}`,
                    DomainApprovers: [
                      { Domain: commonName, Approvers: [`admin@${base}`] },
                      { Domain: base, Approvers: [`admin@${base}`] },
                    ],
                  }
                : {}),
              PartnerOrderID: partnerOrderId,
            }),
            contacts_json: contacts,
            organization_json: null,
            csr_pem: o.csrPem,
            csr_sha256: hex(`c${id}`).toUpperCase(),
            price_minor: product.priceMinor,
            currency: 'EUR',
            billing_status: billing,
            order_date: orderDate,
            update_date: updateDate,
            issued_at: issuedAt,
            term_end: null,
            failure_reason: failure,
            dcv_value: hex(`d${id}`).slice(0, 32),
          });
          for (const name of [commonName, base]) {
            nameRows.push({
              order_id: id,
              name,
              method,
              status: validated ? 'VALIDATED' : 'PENDING',
              approver_email: method === 'EMAIL' ? `admin@${base}` : null,
              validated_at: validated ? issuedAt : null,
              last_checked_at: validated ? issuedAt : major === 'PENDING' ? updateDate : null,
              last_problem:
                validated || method === 'EMAIL'
                  ? null
                  : method === 'DNS'
                    ? `No TXT record at ${base}.`
                    : `http://${name}/.well-known/pki-validation/fileauth.txt: HTTP 404`,
            });
          }
        }
        await tx.insertInto('orders').values(orderRows).execute();
        await tx.insertInto('order_names').values(nameRows).execute();
        names += nameRows.length;
      }
    });
  }
  if (o.count > PROBE_INDEX && probeCommonName === '') throw new Error('the probe order was not seeded');
  return { orders: o.count, names, probeCommonName };
}

/**
 * A GET /ModifiedOrders window [from, to) in the middle of the customer's orders that holds at
 * least `size` orders (a little more when update dates tie at its end).
 */
export async function modifiedWindow(
  db: Db,
  customerId: number,
  size: number,
): Promise<{ from: string; to: string; orders: number }> {
  const total = Number(
    (
      await db.kysely
        .selectFrom('orders')
        .select((e) => e.fn.countAll<number>().as('n'))
        .where('customer_id', '=', customerId)
        .executeTakeFirstOrThrow()
    ).n,
  );
  const at = async (offset: number) =>
    (
      await db.kysely
        .selectFrom('orders')
        .select('update_date')
        .where('customer_id', '=', customerId)
        .orderBy('update_date')
        .orderBy('id')
        .offset(offset)
        .limit(1)
        .executeTakeFirstOrThrow()
    ).update_date;
  const middle = Math.floor(total / 2);
  const from = await at(middle);
  const to = (await at(middle + size - 1)) + 1;
  const n = Number(
    (
      await db.kysely
        .selectFrom('orders')
        .select((e) => e.fn.countAll<number>().as('n'))
        .where('customer_id', '=', customerId)
        .where('update_date', '>=', from)
        .where('update_date', '<', to)
        .executeTakeFirstOrThrow()
    ).n,
  );
  return { from: formatTimestamp(from)!, to: formatTimestamp(to)!, orders: n };
}
