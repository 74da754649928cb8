import { describe, expect, it } from 'vitest';
import { contents, readTlv } from '../core/der.js';
import { octets, seq, tlv } from './der-writer.js';

// X.690 §8.1.3: the short form below 128 content bytes, then the long form with the fewest length bytes.
const HEADERS: [number, number[]][] = [
  [0, [0x04, 0x00]],
  [1, [0x04, 0x01]],
  [0x7f, [0x04, 0x7f]],
  [0x80, [0x04, 0x81, 0x80]],
  [0xff, [0x04, 0x81, 0xff]],
  [0x100, [0x04, 0x82, 0x01, 0x00]],
  [0x1234, [0x04, 0x82, 0x12, 0x34]],
  [0xffff, [0x04, 0x82, 0xff, 0xff]],
  [0x10000, [0x04, 0x83, 0x01, 0x00, 0x00]],
  [0x123456, [0x04, 0x83, 0x12, 0x34, 0x56]],
  [0x1000000, [0x04, 0x84, 0x01, 0x00, 0x00, 0x00]],
];

describe('tlv', () => {
  for (const [length, header] of HEADERS) {
    it(`writes the minimal header for ${length} content bytes and the contents after it`, () => {
      const body = new Uint8Array(length).map((_, i) => i % 251);
      const der = octets(body);
      expect([...der.subarray(0, header.length)]).toEqual(header);
      expect(der.length).toBe(header.length + length);
      const read = readTlv(der, 0);
      expect(read.end).toBe(der.length);
      expect(Buffer.compare(contents(der, read), body)).toBe(0);
    });
  }

  it('concatenates its parts in order, across a part that crosses the short-form limit', () => {
    const parts = [Uint8Array.of(1, 2), new Uint8Array(0x7e).fill(9), Uint8Array.of(3)];
    const der = seq(...parts);
    expect([...der.subarray(0, 3)]).toEqual([0x30, 0x81, 0x81]);
    expect([...der.subarray(3, 5)]).toEqual([1, 2]);
    expect(der[der.length - 1]).toBe(3);
    expect(tlv(0x30).length).toBe(2);
  });
});
