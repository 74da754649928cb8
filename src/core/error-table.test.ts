import { describe, expect, it } from 'vitest';
import { ERROR_TABLE } from './error-table.js';
import { CertdeskError, CommitOutcomeUnknown, isRefusal, type ErrorKind } from './errors.js';

describe('ERROR_TABLE', () => {
  const rows = Object.entries(ERROR_TABLE) as [ErrorKind, (typeof ERROR_TABLE)[ErrorKind]][];

  it('has one row per kind with a valid HTTP status and a message', () => {
    for (const [kind, row] of rows) {
      expect(new CertdeskError(kind).kind).toBe(kind);
      expect(row.status).toBeGreaterThanOrEqual(400);
      expect(row.status).toBeLessThan(600);
      expect(row.message.length).toBeGreaterThan(10);
    }
    expect(new Set(rows.map(([kind]) => kind)).size).toBe(rows.length);
  });

  it('keeps the fixed ErrorIds and HTTP codes of DESIGN §5.1', () => {
    expect(ERROR_TABLE.forbidden).toMatchObject({ status: 403, errorId: -2004 });
    expect(ERROR_TABLE.unauthenticated.status).toBe(401);
    expect(ERROR_TABLE.invalidOrderState).toMatchObject({ errorId: -2011, status: 409 });
    expect(ERROR_TABLE.orderNotFound).toMatchObject({ errorId: -2011, status: 404 });
    expect(ERROR_TABLE.invalidVoucher.errorId).toBe(-2011);
    expect(ERROR_TABLE.dcvFailed.errorId).toBe(-3202);
    expect(ERROR_TABLE.voucherDeleteRefused.errorId).toBe(403);
    expect(ERROR_TABLE.invalidInput.status).toBe(417);
    expect(ERROR_TABLE.payloadTooLarge.status).toBe(413);
    expect(ERROR_TABLE.rateLimited.status).toBe(429);
  });

  it('gives distinct ErrorIds to kinds that are not the spec’s shared -2011 family', () => {
    const ids = rows.filter(([, r]) => r.errorId !== -2011).map(([, r]) => r.errorId);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe('refusals and failures', () => {
  it('ok/a refusal is a CertdeskError the caller caused; not ready, a lost COMMIT and internal errors are not', () => {
    expect(isRefusal(new CertdeskError('invalidInput'))).toBe(true);
    expect(isRefusal(new CertdeskError('conflict'))).toBe(true);
    expect(isRefusal(new CertdeskError('notReady'))).toBe(false);
    expect(isRefusal(new CommitOutcomeUnknown(new Error('lost')))).toBe(false);
    expect(isRefusal(new CertdeskError('internal'))).toBe(false);
    expect(isRefusal(new Error('plain'))).toBe(false);
  });
});
