/**
 * The one error type of certdesk. A `kind` names what went wrong in domain terms; the HTTP
 * status, ErrorId and default message live in `error-table.ts`, never here.
 */
export type ErrorKind =
  | 'malformedRequest'
  | 'invalidInput'
  | 'invalidCsr'
  | 'badKey'
  | 'invalidName'
  | 'unknownProduct'
  | 'unauthenticated'
  | 'forbidden'
  | 'notFound'
  | 'orderNotFound'
  | 'invalidOrderState'
  | 'invalidVoucher'
  | 'voucherDeleteRefused'
  | 'conflict'
  | 'creditLimitExceeded'
  | 'dcvFailed'
  | 'payloadTooLarge'
  | 'rateLimited'
  | 'notReady'
  | 'internal';

/** One fault in a request that may carry several (POST /Order reports them all at once). */
export interface FieldFault {
  readonly kind: ErrorKind;
  readonly field?: string;
  readonly message?: string;
}

export class CertdeskError extends Error {
  readonly kind: ErrorKind;
  /** Name of the offending request member (`ErrorField`), where there is one. */
  readonly field: string | undefined;
  /** Further faults of the same request, reported together; the first mirrors this error. */
  readonly faults: readonly FieldFault[];

  constructor(
    kind: ErrorKind,
    message?: string,
    options: { field?: string; faults?: FieldFault[]; cause?: unknown } = {},
  ) {
    super(message ?? kind, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'CertdeskError';
    this.kind = kind;
    this.field = options.field;
    this.faults = options.faults ?? [];
    this.hasMessage = message !== undefined;
  }

  /** Whether the message was given by the thrower (else the table's default is shown). */
  readonly hasMessage: boolean;

  /** Several faults at once: the first one becomes the flat members of the failure body. */
  static ofFaults(faults: FieldFault[]): CertdeskError {
    const [first] = faults;
    if (first === undefined) throw new Error('ofFaults needs at least one fault');
    return new CertdeskError(first.kind, first.message, { field: first.field, faults });
  }
}

export function isCertdeskError(e: unknown): e is CertdeskError {
  return e instanceof CertdeskError;
}

/**
 * The database cannot serve now (out of reach, busy, out of room), said in `reason`: sending the
 * same request again shortly may do, and nothing of this one was committed as far as can be told.
 */
export class DatabaseUnavailable extends CertdeskError {
  constructor(reason: string, cause: unknown) {
    super('notReady', `${reason} Try again shortly.`, { cause });
    this.name = 'DatabaseUnavailable';
  }
}

/**
 * A refusal of the request, for what it asks or the state it meets: not a failure of the service
 * (`internal`; `notReady`: the database out of reach, a COMMIT whose outcome is unknown), which a
 * later try may get past and which is never shown as the caller's fault.
 */
export function isRefusal(e: unknown): e is CertdeskError {
  return e instanceof CertdeskError && e.kind !== 'internal' && e.kind !== 'notReady';
}

/**
 * A transaction's COMMIT was sent and its answer lost (the connection dropped), and whether the
 * database kept it could not be found out: what the request changed may or may not be there. A
 * retry must look first (an order by its PartnerOrderID), never repeat the change blindly.
 */
export class CommitOutcomeUnknown extends CertdeskError {
  constructor(cause: unknown) {
    super(
      'notReady',
      'The connection to the database was lost while this request was being committed, and whether it took effect could not be found out: look before sending it again (an order by its PartnerOrderID).',
      { cause },
    );
    this.name = 'CommitOutcomeUnknown';
  }
}
