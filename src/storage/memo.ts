// Memo of values worked out from texts (statement names, held writes' pieces), bounded.

/**
 * `memo`'s value for `key`, made and kept when it has none. A memo only saves work: one that
 * holds `limit` entries is cleared, which bounds its memory whatever texts come.
 */
export function memoised<T>(memo: Map<string, T>, key: string, make: () => T, limit: number): T {
  let value = memo.get(key);
  if (value === undefined) {
    value = make();
    if (memo.size >= limit) memo.clear();
    memo.set(key, value);
  }
  return value;
}
