import { randomBytes } from 'node:crypto';

/** Upper-case hex, as `openssl x509 -serial` prints it and the CA records it. */
export const serialHex = (serial: Uint8Array) => Buffer.from(serial).toString('hex').toUpperCase();

// Random bytes come from a pool refilled 4 KiB at a time: one CSPRNG call per ~450 serials
// instead of one each (a call costs ~5 µs, as much as encoding the rest of the certificate).
let randomPool = Buffer.alloc(0);
let randomPos = 0;
const SERIAL_RANDOM_BYTES = 9;

/**
 * A serial number of 16 octets: 0x01, the issue second (32 bits), the millisecond of the machine's
 * clock as a fraction of the second (16 bits), then 72 bits from the CSPRNG (BR §7.1: at least 64).
 * Positive and minimal by construction. The time prefix keeps new serials in ascending order, so
 * recording one appends to the serial index instead of writing a random page of it: a third of the
 * cost of recording a leaf in SQLite. The millisecond keeps that order within a second, when
 * thousands of leaves share one (ECDSA issuance as bench/ca.ts runs it: +12-25 %). It orders, nothing
 * more: it is read from the machine's clock even when the CA's clock is another (tests fix it).
 */
export function newSerial(now: number): Uint8Array {
  if (randomPos + SERIAL_RANDOM_BYTES > randomPool.length) {
    randomPool = randomBytes(4096);
    randomPos = 0;
  }
  const s = Buffer.allocUnsafe(16);
  s[0] = 0x01;
  s.writeUInt32BE(now >>> 0, 1);
  s.writeUInt16BE(Math.floor(((Date.now() % 1000) * 65_536) / 1000), 5);
  randomPool.copy(s, 7, randomPos, randomPos + SERIAL_RANDOM_BYTES);
  randomPool.fill(0, randomPos, randomPos + SERIAL_RANDOM_BYTES);
  randomPos += SERIAL_RANDOM_BYTES;
  return s;
}
