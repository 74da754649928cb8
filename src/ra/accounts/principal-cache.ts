import { SharedCache, type CacheBroadcast, type Principal } from '../../core/index.js';

/**
 * A small in-process cache of resolved bearer tokens, so that the hot path of an authenticated
 * request costs no query. Entries live `ttlMs` at most and never past the token's expiry.
 * Every revocation clears the cache at once: in this process, and in every other one through
 * the deployment's broadcast (`connect`: PostgreSQL LISTEN/NOTIFY or Redis pub/sub); `ttlMs`
 * stays the bound should a broadcast be lost (docs/operations.md).
 * Keyed by the bearer token itself, so a hit costs no hashing: the tokens live in this
 * process's memory only, as they do while a request is served, and never reach storage or logs.
 */
export class PrincipalCache {
  private readonly cache: SharedCache<{ principal: Principal; until: number }>;

  constructor(
    private readonly ttlMs: number,
    maxEntries = 10_000,
  ) {
    this.cache = new SharedCache('principals', maxEntries);
  }

  /** The cached principal for a bearer token, or undefined when absent or stale. */
  get(token: string, nowMs: number): Principal | undefined {
    const entry = this.cache.get(token);
    if (entry === undefined) return undefined;
    if (entry.until <= nowMs || entry.principal.expiresAt * 1000 <= nowMs) {
      this.cache.delete(token);
      return undefined;
    }
    return entry.principal;
  }

  /** The current generation: read it before looking a token up, give it to `set`. */
  get epoch(): number {
    return this.cache.epoch;
  }

  /** Caches a principal read in generation `epoch`; nothing when a clear came in between. */
  set(token: string, principal: Principal, nowMs: number, epoch = this.cache.epoch): void {
    if (this.ttlMs <= 0) return;
    this.cache.set(token, { principal, until: nowMs + this.ttlMs }, epoch);
  }

  /** Hears every other process's clears, and tells them of this one's. */
  connect(broadcast: CacheBroadcast): void {
    this.cache.connect(broadcast);
  }

  /**
   * Forgets everything, here and in every other process: after any revocation, role or account
   * change. Resolves once the news is out (see Broadcast.publish).
   */
  clear(): Promise<void> {
    return this.cache.clear();
  }
}
