import { hashSecret, randomString } from '../accounts/secrets.js';

// Voucher codes (DESIGN §5.8): read aloud and typed by people, so drawn from an alphabet without
// look-alikes (no 0/O, 1/I/L, and no U), grouped by four, case-insensitive on input. 24 symbols of
// 30 carry 24 · log2(30) ≈ 117.8 random bits from the CSPRNG: no code says anything about another.

const ALPHABET = '23456789ABCDEFGHJKMNPQRSTVWXYZ';
const LENGTH = 24;
const GROUP = 4;

/** Random bits a code carries (documented in docs/vouchers.md). */
export const VOUCHER_CODE_BITS = Math.floor(LENGTH * Math.log2(ALPHABET.length));

/** A new code, e.g. `7KQM-XD4R-…` (six groups of four). */
export function newVoucherCode(): string {
  return group(randomString(ALPHABET, LENGTH));
}

/**
 * The canonical form of a code as someone typed it (any case, with or without dashes or spaces),
 * or undefined when it cannot be a code at all.
 */
export function normalizeVoucherCode(input: unknown): string | undefined {
  if (typeof input !== 'string' || input.length > 64) return undefined;
  const bare = input.toUpperCase().replace(/[\s-]/g, '');
  if (bare.length !== LENGTH) return undefined;
  for (const ch of bare) if (!ALPHABET.includes(ch)) return undefined;
  return group(bare);
}

/** How a code is looked up: SHA-256 of its canonical form (the code itself is kept only sealed). */
export function voucherCodeHash(canonical: string): string {
  return hashSecret(`voucher:${canonical}`);
}

/** A code as shown to someone who may not redeem it: only its last group. */
export function maskedCode(code: string): string {
  return `****-****-****-****-****-${code.slice(-GROUP)}`;
}

function group(bare: string): string {
  return bare.match(new RegExp(`.{1,${GROUP}}`, 'g'))!.join('-');
}
