import { describe, expect, it } from 'vitest';
import { currencyDecimals, fromMinor, toMinor } from './money.js';

describe('currency minor units', () => {
  it.each([
    ['EUR', 2],
    ['USD', 2],
    ['JPY', 0],
    ['HUF', 0],
    ['XOF', 0],
    ['BHD', 3],
    ['KWD', 3],
    ['TND', 3],
    ['ZZZ', 2],
  ])('%s has %i', (currency, digits) => {
    expect(currencyDecimals(currency)).toBe(digits);
  });

  it('converts with each currency its own digits (a listed 18.500 BHD is not 185.00)', () => {
    expect(fromMinor(18_500, 'BHD')).toBe(18.5);
    expect(toMinor(16.1725, 'KWD')).toBe(16_173);
    expect(toMinor(32_141.89, 'XOF')).toBe(32_142);
    expect(fromMinor(1250, 'EUR')).toBe(12.5);
  });
});
