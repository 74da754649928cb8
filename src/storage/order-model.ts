import type { Insertable, Selectable } from 'kysely';
import {
  BILLING_STATUSES,
  MAJOR_STATUSES,
  MINOR_STATUSES,
  NAME_DCV_STATUSES,
  ORDER_DCV_METHODS,
  PRODUCT_TYPES,
  SIGNATURE_HASH_ALGORITHMS,
  VALIDATION_LEVELS,
  certificateId,
  customerId,
  money,
  orderId,
  orderNameId,
  type CertificateId,
  type Order,
  type OrderContacts,
  type OrderDcvMethod,
  type OrderId,
  type OrderName,
  type OrderParameters,
  type MinorStatus,
  type NameDcvStatus,
  type OrganizationInfo,
  type Product,
  type SignatureHashAlgorithm,
  type VettedData,
} from '../core/index.js';
import type { OrderNamesTable, OrdersTable } from './schema.js';

// The one mapping between order rows and the domain's Order (Boulder's sa/model.go
// `modelToOrder`): JSON columns are parsed here and only here, status columns checked against
// their closed unions. Nothing above storage sees a row.

type OrderRow = Selectable<OrdersTable>;
type OrderNameRow = Selectable<OrderNamesTable>;

/** Leaving WF_ISSUANCE ends the round's issuance claim: the columns every such change sets. */
export const UNCLAIMED = { issuance_claim: null, issuance_claim_until: null } as const;

/** A new order, as `OrdersRepo.insertOrder` stores it: PENDING, charge uncleared. */
export type NewOrder = Pick<
  Order,
  | 'customerId'
  | 'partnerOrderId'
  | 'productCode'
  | 'soldProduct'
  | 'productType'
  | 'caBrand'
  | 'validationLevel'
  | 'commonName'
  | 'sanNames'
  | 'minorStatus'
  | 'signatureHashAlgorithm'
  | 'validityPeriod'
  | 'serverCount'
  | 'parameters'
  | 'contacts'
  | 'organization'
  | 'price'
  | 'orderDate'
> & {
  /** SHA-256 of the canonical request, so a retried POST can be told from a different one. */
  readonly requestHash: string;
  readonly dvAuthMethod: OrderDcvMethod;
  readonly csrPem: string;
  readonly csrSha256: string;
  readonly dcvValue: string;
  /**
   * The issuance claim taken with the order's creation (WF_ISSUANCE only: POST /Order issuing
   * inline), so that no one else can start signing it between the commit and the inline issuance.
   */
  readonly issuanceClaim?: { readonly claim: string; readonly until: number };
};

/** A name of a new order or of a new reissue round; a name shown recently enough comes VALIDATED. */
export interface NewOrderName {
  readonly name: string;
  readonly method: OrderDcvMethod;
  readonly status: NameDcvStatus;
  readonly approverEmail: string | null;
  readonly validatedAt?: number | null;
  readonly lastCheckedAt?: number | null;
}

/** A new reissue round (`OrdersRepo.setPendingReissue`): the order's request and DCV replaced. */
export interface ReissueRound {
  /** The DCV minor the round waits in, or WF_ISSUANCE when every name is still validated. */
  readonly minorStatus: MinorStatus;
  readonly csrPem: string;
  readonly csrSha256: string;
  readonly commonName: string;
  readonly sanNames: readonly string[];
  readonly signatureHashAlgorithm: SignatureHashAlgorithm;
  readonly dvAuthMethod: OrderDcvMethod;
  readonly dcvValue: string;
  readonly parameters: OrderParameters;
  /** The newest certificate of the order now: the round's own certificates come after it. */
  readonly baseCert: CertificateId | null;
  readonly startedAt: number;
}

/** What completing an issuance round records (`OrdersRepo.markIssued`). */
export interface IssuedFacts {
  /** EndDate of the certificate delivered. */
  readonly certNotAfter: number;
  /** Only on the first issuance: its time, the term it starts and the charge cleared. */
  readonly first?: { readonly issuedAt: number; readonly termEnd: number };
}

/** A value of a closed union read from a column; anything else is a corrupt row, not a domain fault. */
function oneOf<T extends string>(values: readonly T[], value: string, column: string, id: number): T {
  if ((values as readonly string[]).includes(value)) return value as T;
  throw new Error(`orders ${id}: ${column} holds ${JSON.stringify(value)}, not one of ${values.join(', ')}`);
}

/** The Order of a row. */
export function toOrder(row: OrderRow): Order {
  const id = row.id;
  // The vetting is kept beside the organization in one column; the customer's view never holds it.
  const stored =
    row.organization_json === null
      ? null
      : (JSON.parse(row.organization_json) as (OrganizationInfo & { Vetted?: VettedData }) | null);
  const { Vetted, ...organization } = stored ?? {};
  return {
    id: orderId(id),
    customerId: customerId(row.customer_id),
    partnerOrderId: row.partner_order_id,
    productCode: row.product_code,
    soldProduct: row.product_json === null ? null : (JSON.parse(row.product_json) as Product),
    productType: oneOf(PRODUCT_TYPES, row.product_type, 'product_type', id),
    caBrand: row.ca_brand,
    validationLevel:
      row.validation_level === null ? null : oneOf(VALIDATION_LEVELS, row.validation_level, 'validation_level', id),
    commonName: row.common_name,
    sanNames: JSON.parse(row.san_names) as string[],
    majorStatus: oneOf(MAJOR_STATUSES, row.major_status, 'major_status', id),
    minorStatus: oneOf(MINOR_STATUSES, row.minor_status, 'minor_status', id),
    dvAuthMethod:
      row.dv_auth_method === null ? null : oneOf(ORDER_DCV_METHODS, row.dv_auth_method, 'dv_auth_method', id),
    signatureHashAlgorithm: oneOf(
      SIGNATURE_HASH_ALGORITHMS,
      row.signature_hash_algorithm,
      'signature_hash_algorithm',
      id,
    ),
    validityPeriod: row.validity_period,
    serverCount: row.server_count,
    parameters: JSON.parse(row.params_json) as OrderParameters,
    contacts: JSON.parse(row.contacts_json) as OrderContacts,
    organization: stored === null ? null : organization,
    vetted: Vetted ?? null,
    csrPem: row.csr_pem,
    csrSha256: row.csr_sha256,
    price: money(row.price_minor, row.currency),
    billingStatus: oneOf(BILLING_STATUSES, row.billing_status, 'billing_status', id),
    orderDate: row.order_date,
    updateDate: row.update_date,
    issuedAt: row.issued_at,
    termEnd: row.term_end,
    failureReason: row.failure_reason,
    dcvValue: row.dcv_value,
    reissuedAt: row.reissued_at,
    reissueBaseCert: row.reissue_base_cert === null ? null : certificateId(row.reissue_base_cert),
    certNotAfter: row.cert_not_after,
    issuanceClaim: row.issuance_claim,
    issuanceClaimUntil: row.issuance_claim_until,
    cancelKey: row.cancel_key,
    cancelRefunded: row.cancel_refunded === null ? null : row.cancel_refunded === 1,
  };
}

/** The row of a new order. */
export function newOrderRow(o: NewOrder): Omit<Insertable<OrdersTable>, 'id'> {
  return {
    customer_id: o.customerId,
    partner_order_id: o.partnerOrderId,
    request_hash: o.requestHash,
    product_code: o.productCode,
    product_json: o.soldProduct === null ? null : JSON.stringify(o.soldProduct),
    product_type: o.productType,
    ca_brand: o.caBrand,
    validation_level: o.validationLevel,
    common_name: o.commonName,
    san_names: JSON.stringify(o.sanNames),
    major_status: 'PENDING',
    minor_status: o.minorStatus,
    dv_auth_method: o.dvAuthMethod,
    signature_hash_algorithm: o.signatureHashAlgorithm,
    validity_period: o.validityPeriod,
    server_count: o.serverCount,
    params_json: JSON.stringify(o.parameters),
    contacts_json: JSON.stringify(o.contacts),
    organization_json: o.organization === null ? null : JSON.stringify(o.organization),
    csr_pem: o.csrPem,
    csr_sha256: o.csrSha256,
    price_minor: o.price.minor,
    currency: o.price.currency,
    billing_status: 'uncleared',
    order_date: o.orderDate,
    update_date: o.orderDate,
    issued_at: null,
    term_end: null,
    failure_reason: null,
    dcv_value: o.dcvValue,
    issuance_claim: o.issuanceClaim?.claim ?? null,
    issuance_claim_until: o.issuanceClaim?.until ?? null,
  };
}

/** The organization column of an order whose organization the operator has vetted. */
export function vettedOrganizationJson(organization: OrganizationInfo | null, vetted: VettedData): string {
  return JSON.stringify({ ...(organization ?? {}), Vetted: vetted });
}

/** The OrderName of a row. */
export function toOrderName(row: OrderNameRow): OrderName {
  return {
    id: orderNameId(row.id),
    orderId: orderId(row.order_id),
    name: row.name,
    method: oneOf(ORDER_DCV_METHODS, row.method, 'order_names.method', row.order_id),
    status: oneOf(NAME_DCV_STATUSES, row.status, 'order_names.status', row.order_id),
    approverEmail: row.approver_email,
    validatedAt: row.validated_at,
    lastCheckedAt: row.last_checked_at,
    lastProblem: row.last_problem,
  };
}

/** The row of a new name of order `id`. */
export function newNameRow(id: OrderId, n: NewOrderName): Insertable<OrderNamesTable> {
  return {
    order_id: id,
    name: n.name,
    method: n.method,
    status: n.status,
    approver_email: n.approverEmail,
    ...(n.validatedAt === undefined ? {} : { validated_at: n.validatedAt }),
    ...(n.lastCheckedAt === undefined ? {} : { last_checked_at: n.lastCheckedAt }),
  };
}

/** The columns a reissue round replaces. */
export function reissueRoundColumns(r: ReissueRound) {
  return {
    minor_status: r.minorStatus,
    csr_pem: r.csrPem,
    csr_sha256: r.csrSha256,
    common_name: r.commonName,
    san_names: JSON.stringify(r.sanNames),
    signature_hash_algorithm: r.signatureHashAlgorithm,
    dv_auth_method: r.dvAuthMethod,
    dcv_value: r.dcvValue,
    params_json: JSON.stringify(r.parameters),
    reissued_at: r.startedAt,
    reissue_base_cert: r.baseCert,
    update_date: r.startedAt,
  };
}
