import { describe, expect, it } from 'vitest';
import { BOOLISH_PATTERN, parseBoolish } from './boolish.js';

describe('parseBoolish', () => {
  it.each([
    [true, true],
    ['true', true],
    ['True', true],
    ['TRUE', true],
    ['1', true],
    [1, true],
    [false, false],
    ['false', false],
    ['False', false],
    ['0', false],
    [0, false],
    ['yes', undefined],
    ['', undefined],
    [2, undefined],
    [null, undefined],
    [{}, undefined],
  ])('%j → %j', (input, expected) => {
    expect(parseBoolish(input)).toBe(expected);
  });

  it('agrees with BOOLISH_PATTERN on strings', () => {
    for (const s of ['true', 'True', 'FALSE', '1', '0', 'yes', 'no', '', ' true', '2']) {
      expect(new RegExp(BOOLISH_PATTERN).test(s)).toBe(parseBoolish(s) !== undefined && s.trim() === s);
    }
  });
});
