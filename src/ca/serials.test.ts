import { afterEach, describe, expect, it, vi } from 'vitest';
import { newSerial } from './serials.js';

const NOW = 1_795_219_200;

describe('newSerial', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('is 0x01, the issue second, the millisecond as a 16-bit fraction, then 72 random bits', () => {
    vi.useFakeTimers({ now: 1_700_000_000_500, toFake: ['Date'] });
    const s = Buffer.from(newSerial(NOW));
    expect(s.length).toBe(16);
    expect(s[0]).toBe(0x01);
    expect(s.readUInt32BE(1)).toBe(NOW);
    expect(s.readUInt16BE(5)).toBe(32_768);
  });

  it('keeps serials in ascending order within a second, millisecond by millisecond', () => {
    vi.useFakeTimers({ now: 1_700_000_000_000, toFake: ['Date'] });
    const serials: Buffer[] = [];
    for (let ms = 0; ms < 1000; ms += 7) {
      vi.setSystemTime(1_700_000_000_000 + ms);
      serials.push(Buffer.from(newSerial(NOW)));
    }
    for (let i = 1; i < serials.length; i++) expect(Buffer.compare(serials[i - 1]!, serials[i]!)).toBe(-1);
    expect(serials.at(-1)!.readUInt16BE(5)).toBe(Math.floor((994 * 65_536) / 1000));
  });

  it('draws every one of the last 72 bits from the CSPRNG: each bit varies, no two serials alike', () => {
    vi.useFakeTimers({ now: 1_700_000_000_000, toFake: ['Date'] });
    const serials = Array.from({ length: 2000 }, () => Buffer.from(newSerial(NOW)));
    expect(new Set(serials.map((s) => s.toString('hex'))).size).toBe(serials.length);
    // The same second and millisecond: only the random part differs.
    expect(new Set(serials.map((s) => s.subarray(0, 7).toString('hex'))).size).toBe(1);
    for (let bit = 0; bit < 72; bit++) {
      const byte = 7 + (bit >> 3);
      const mask = 0x80 >> (bit & 7);
      const ones = serials.filter((s) => (s[byte]! & mask) !== 0).length;
      // A fair bit is set in 1,000 of 2,000 draws, σ ≈ 22: ±150 is 6.7σ (all 72 bits: p ≈ 1.5e-9 per run).
      expect(ones).toBeGreaterThan(850);
      expect(ones).toBeLessThan(1150);
    }
  });
});
