/**
 * Order states (DESIGN §5.4): MajorStatus / MinorStatus / Progress. Pure rules: what follows what
 * and what each state shows. Storage applies transitions as guarded updates.
 */

export const MAJOR_STATUSES = ['PENDING', 'COMPLETE', 'REISSUE', 'CANCELLED', 'REVOKED', 'FAILED'] as const;
export type MajorStatus = (typeof MAJOR_STATUSES)[number];

export const MINOR_STATUSES = [
  'NONE',
  'WF_DNS_AUTH',
  'WF_FILE_AUTH',
  'WF_EMAIL_AUTH',
  'WF_ORG_VALIDATION',
  'WF_ISSUANCE',
  'COMPLETED',
  'EXPIRED',
  'CANCELLED',
  'REVOKED',
  'DCV_EXPIRED',
  'CAA_FORBIDDEN',
  'REJECTED',
  'ISSUANCE_ERROR',
] as const;
export type MinorStatus = (typeof MINOR_STATUSES)[number];

/** The DCV methods an order may use (spec 2.8); META is advertised by one brand but not ordered. */
export const ORDER_DCV_METHODS = ['EMAIL', 'DNS', 'FILE'] as const;
export type OrderDcvMethod = (typeof ORDER_DCV_METHODS)[number];

const WAITING: Record<OrderDcvMethod, MinorStatus> = {
  DNS: 'WF_DNS_AUTH',
  FILE: 'WF_FILE_AUTH',
  EMAIL: 'WF_EMAIL_AUTH',
};

/** The minor status of an order waiting for its names' control to be shown by `method`. */
export function waitingFor(method: OrderDcvMethod): MinorStatus {
  return WAITING[method];
}

/** Progress in percent shown for a state (DESIGN §5.4). */
export function progressOf(major: MajorStatus, minor: MinorStatus): number {
  if (major === 'COMPLETE') return 100;
  if (major === 'PENDING' || major === 'REISSUE') {
    if (minor === 'NONE') return 0;
    if (minor === 'WF_ORG_VALIDATION') return 50;
    if (minor === 'WF_ISSUANCE') return 75;
    return 25;
  }
  return major === 'FAILED' ? 0 : 100;
}

/** Majors accepted by the Status filter of GET /Orders (comma-separated; REISSUE and FAILED beyond the spec's four). */
export function parseStatusFilter(text: string): { statuses: MajorStatus[]; unknown: string[] } {
  const parts = text
    .split(',')
    .map((s) => s.trim().toUpperCase())
    .filter(Boolean);
  const statuses = parts.filter((p): p is MajorStatus => (MAJOR_STATUSES as readonly string[]).includes(p));
  return {
    statuses: [...new Set(statuses)],
    unknown: parts.filter((p) => !(MAJOR_STATUSES as readonly string[]).includes(p)),
  };
}

/** What GET /Orders sorts by: OrderBy names one of these, ID (the original service's name) by default. */
export type OrderSortField = 'ServiceOrderID' | 'OrderDate' | 'UpdateDate' | 'CommonName' | 'EndDate';

/** OrderBy values and the field each sorts by; `ID` and `CertCenterOrderID` alias the order id. */
const ORDER_BY: Readonly<Record<string, OrderSortField>> = {
  ID: 'ServiceOrderID',
  ServiceOrderID: 'ServiceOrderID',
  CertCenterOrderID: 'ServiceOrderID',
  OrderDate: 'OrderDate',
  UpdateDate: 'UpdateDate',
  CommonName: 'CommonName',
  EndDate: 'EndDate',
};
export const ORDER_BY_VALUES = Object.keys(ORDER_BY);

/**
 * OrderBy and OrderDir of GET /Orders, read case-insensitively (clients send `OrderBy=ID&OrderDir=DESC`
 * and other spellings); `orderBy` is the value in its documented spelling. Undefined members when a
 * value is none of the allowed ones: the caller names the allowed values in its refusal.
 */
export function parseOrderSort(
  orderBy: string | undefined,
  orderDir: string | undefined,
): { orderBy?: string; field?: OrderSortField; dir?: 'ASC' | 'DESC' } {
  const by =
    (orderBy ?? '').trim() === ''
      ? 'ID'
      : ORDER_BY_VALUES.find((v) => v.toLowerCase() === orderBy!.trim().toLowerCase());
  const dirText = (orderDir ?? '').trim().toUpperCase() || 'DESC';
  return {
    ...(by === undefined ? {} : { orderBy: by, field: ORDER_BY[by] }),
    ...(dirText === 'ASC' || dirText === 'DESC' ? { dir: dirText } : {}),
  };
}

/** The minors of a FAILED order (DESIGN §5.4). */
export type FailedMinorStatus = 'DCV_EXPIRED' | 'CAA_FORBIDDEN' | 'REJECTED' | 'ISSUANCE_ERROR';

/** DCV state of one name of an order. */
export const NAME_DCV_STATUSES = ['PENDING', 'VALIDATED', 'FAILED'] as const;
export type NameDcvStatus = (typeof NAME_DCV_STATUSES)[number];

/** BillingInfo.Status (DESIGN §5.5). */
export const BILLING_STATUSES = ['uncleared', 'cleared', 'refunded'] as const;
export type BillingStatus = (typeof BILLING_STATUSES)[number];
