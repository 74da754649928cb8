/**
 * Money is integer minor units in storage and arithmetic; it becomes a number with the
 * currency's decimals only when rendered (DESIGN §5.1).
 */
// Kept as they were first stored (HUF's prices have no fillér, as in ICU's data), whatever the table below says.
const ZERO_DECIMAL = new Set(['JPY', 'KRW', 'CLP', 'ISK', 'HUF', 'VND']);

export function currencyDecimals(currency: string): number {
  if (ZERO_DECIMAL.has(currency)) return 0;
  let digits = DECIMALS.get(currency);
  if (digits === undefined) {
    digits = isoDecimals(currency);
    DECIMALS.set(currency, digits);
  }
  return digits;
}

/** Minor digits of the currencies not listed above, as ICU's ISO 4217 data has them (BHD 3, XOF 0). */
const DECIMALS = new Map<string, number>();

function isoDecimals(currency: string): number {
  try {
    return new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2;
  } catch {
    return 2;
  }
}

/** 12.5 EUR → 1250. Rounds half away from zero to the currency's precision. */
export function toMinor(amount: number, currency: string): number {
  const factor = 10 ** currencyDecimals(currency);
  return Math.sign(amount) * Math.round(Math.abs(amount) * factor);
}

/** 1250 EUR minor units → 12.5 */
export function fromMinor(minor: number, currency: string): number {
  const factor = 10 ** currencyDecimals(currency);
  return Number((minor / factor).toFixed(currencyDecimals(currency)));
}

export function isCurrencyCode(text: string): boolean {
  return /^[A-Z]{3}$/.test(text);
}

/** An amount in one currency, held as integer minor units (DESIGN §5.1). */
export interface Money {
  readonly minor: number;
  readonly currency: string;
}

export function money(minor: number, currency: string): Money {
  return { minor, currency };
}

/** The amount as rendered: a number with the currency's decimals (1250 EUR → 12.5, 7963 JPY → 7963). */
export function amountOf(m: Money): number {
  return fromMinor(m.minor, m.currency);
}
