import type { ErrorKind } from './errors.js';

export interface ErrorRow {
  /** HTTP status of the failure response (DESIGN §5.1). */
  readonly status: number;
  /** `ErrorId` in the failure body; fixed values come from the spec and DESIGN §5.1. */
  readonly errorId: number;
  /** Message shown when the thrower gave none. */
  readonly message: string;
}

/**
 * The single table from error kind to HTTP status, ErrorId and default message.
 * `docs/errors.md` is generated from it (`npm run docs:errors`); a test checks that
 * every kind has exactly one row and the document is current.
 */
export const ERROR_TABLE = {
  // 417 like every other bad request data (DESIGN §5.1): existing clients parse that body.
  malformedRequest: { status: 417, errorId: -1000, message: 'The request could not be parsed.' },
  invalidInput: { status: 417, errorId: -1001, message: 'The request data is invalid.' },
  invalidCsr: { status: 417, errorId: -1002, message: 'The CSR could not be parsed or its signature is invalid.' },
  badKey: { status: 417, errorId: -1005, message: 'The public key is too weak or of a type the CA does not certify.' },
  invalidName: { status: 417, errorId: -1003, message: 'The name is not a valid fully qualified domain name.' },
  unknownProduct: { status: 417, errorId: -1004, message: 'The product code is unknown.' },
  unauthenticated: { status: 401, errorId: -2001, message: 'The access token is incorrect or has expired.' },
  forbidden: {
    status: 403,
    errorId: -2004,
    message: 'Authorization failed: the token or user lacks the scope or role for this request.',
  },
  notFound: { status: 404, errorId: -2404, message: 'The requested resource does not exist.' },
  orderNotFound: { status: 404, errorId: -2011, message: 'Invalid order id: no such order.' },
  invalidOrderState: { status: 409, errorId: -2011, message: 'The order is in an invalid state for this request.' },
  invalidVoucher: { status: 404, errorId: -2011, message: 'The voucher token is invalid.' },
  voucherDeleteRefused: {
    status: 409,
    errorId: 403,
    message: 'The voucher does not exist or has already been redeemed.',
  },
  conflict: { status: 409, errorId: -2409, message: 'The request conflicts with the current state.' },
  creditLimitExceeded: {
    status: 417,
    errorId: -3001,
    message: 'The order would exceed the credit limit of the account.',
  },
  dcvFailed: {
    status: 417,
    errorId: -3202,
    message: 'The domain control validation record was not found or is wrong.',
  },
  payloadTooLarge: { status: 413, errorId: -1413, message: 'The request body is too large.' },
  rateLimited: { status: 429, errorId: -1429, message: 'Too many requests: retry later.' },
  notReady: { status: 503, errorId: -1503, message: 'The service is not ready: the database is not reachable.' },
  internal: { status: 500, errorId: -1500, message: 'Internal server error.' },
} as const satisfies Record<ErrorKind, ErrorRow>;

export function errorRow(kind: ErrorKind): ErrorRow {
  return ERROR_TABLE[kind];
}
