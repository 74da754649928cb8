import type { Principal } from '../../core/index.js';

/**
 * A small in-process cache of resolved bearer tokens, so that the hot path of an authenticated
 * request costs no query. Entries live `ttlMs` at most and never past the token's expiry.
 * Every revocation made through this process clears the cache at once; a revocation made by
 * another process (PostgreSQL deployments) is seen within `ttlMs` (docs/operations.md).
 * Keyed by the bearer token itself, so a hit costs no hashing: the tokens live in this
 * process's memory only, as they do while a request is served, and never reach storage or logs.
 */
export class PrincipalCache {
  private readonly entries = new Map<string, { principal: Principal; until: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  /** The cached principal for a bearer token, or undefined when absent or stale. */
  get(token: string, nowMs: number): Principal | undefined {
    const entry = this.entries.get(token);
    if (entry === undefined) return undefined;
    if (entry.until <= nowMs || entry.principal.expiresAt * 1000 <= nowMs) {
      this.entries.delete(token);
      return undefined;
    }
    return entry.principal;
  }

  set(token: string, principal: Principal, nowMs: number): void {
    if (this.ttlMs <= 0) return;
    if (this.entries.size >= this.maxEntries) {
      // Oldest first: Map iterates in insertion order.
      const oldest = this.entries.keys().next();
      if (oldest.done !== true) this.entries.delete(oldest.value);
    }
    this.entries.set(token, { principal, until: nowMs + this.ttlMs });
  }

  /** Forgets everything: after any revocation, role or account change. */
  clear(): void {
    this.entries.clear();
  }
}
