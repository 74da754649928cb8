import { customerId, type CustomerId } from '../core/index.js';

/** A positive whole number as typed; throws a one-line error naming `what` otherwise. */
export function parsePositive(text: string, what: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(n) || n <= 0) throw new Error(`not a ${what}: ${text}`);
  return n;
}

export function parseCustomer(text: string): CustomerId {
  return customerId(parsePositive(text, 'customer id'));
}

/** A decimal number as typed; NaN (refused later with the field named) for anything else, '' included. */
export function strictNumber(text: string): number {
  return /^\d+(\.\d+)?$/.test(text.trim()) ? Number(text) : Number.NaN;
}
