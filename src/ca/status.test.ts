import { describe, expect, it } from 'vitest';
import type { RevokedEntry } from '../storage/index.js';
import { STATUS_VALIDITY, crlDue, crlEntriesDigest, crlLags } from './status.js';

const NOW = 1_800_000_000;
const a: RevokedEntry = { serial: '0A', revokedAt: NOW - 100, reason: 1 };
const b: RevokedEntry = { serial: '0B', revokedAt: NOW - 50, reason: null };

describe('crlLags: when the hourly job re-signs a stored CRL', () => {
  const stored = (entries: RevokedEntry[], nextUpdate = NOW + STATUS_VALIDITY) => ({
    nextUpdate,
    entriesDigest: crlEntriesDigest(entries),
  });

  it('ok/a fresh CRL listing what it would list now is left alone', () => {
    expect(crlLags(stored([a, b]), [a, b], NOW)).toBe(false);
  });

  it('ok/a CRL missing a revocation, a raised reason or still listing an expired entry lags', () => {
    expect(crlLags(stored([a]), [a, b], NOW)).toBe(true);
    expect(crlLags(stored([a, b]), [a, { ...b, reason: 1 }], NOW)).toBe(true);
    expect(crlLags(stored([a, b]), [a], NOW)).toBe(true);
  });

  it('ok/no CRL yet, one past half its validity, or one stored before digests were kept', () => {
    expect(crlLags(undefined, [], NOW)).toBe(true);
    expect(crlLags(stored([a]), [a], NOW + STATUS_VALIDITY / 2)).toBe(true);
    expect(crlDue(stored([a]), NOW + STATUS_VALIDITY / 2 - 1)).toBe(false);
    expect(crlLags({ nextUpdate: NOW + STATUS_VALIDITY, entriesDigest: null }, [a], NOW)).toBe(true);
  });

  it('ok/the digest follows the entries and their order (revokedOf gives one order)', () => {
    expect(crlEntriesDigest([a, b])).toBe(crlEntriesDigest([{ ...a }, { ...b }]));
    expect(crlEntriesDigest([a, b])).not.toBe(crlEntriesDigest([b, a]));
    expect(crlEntriesDigest([])).toMatch(/^[0-9a-f]{64}$/);
  });
});
