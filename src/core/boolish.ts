/**
 * Booleans as clients of the original service spell them (DESIGN §5.2): `true/false`,
 * `True/False`, `1/0`. One reading for query strings, bodies and the order rules.
 */

/** `true/false`, `True/False`, `1/0` (and real booleans) → boolean; anything else undefined. */
export function parseBoolish(value: unknown): boolean | undefined {
  if (typeof value === 'boolean') return value;
  if (typeof value === 'number') return value === 1 ? true : value === 0 ? false : undefined;
  if (typeof value !== 'string') return undefined;
  const v = value.trim().toLowerCase();
  if (v === 'true' || v === '1') return true;
  if (v === 'false' || v === '0') return false;
  return undefined;
}

/** JSON-schema pattern for the same spellings, for query strings and string members of bodies. */
export const BOOLISH_PATTERN = '^(?:[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee]|1|0)$';
