import type { Principal } from '../../core/index.js';

/**
 * A small in-process cache of resolved bearer tokens, so that the hot path of an authenticated
 * request costs no query. Entries live `ttlMs` at most and never past the token's expiry.
 * Every revocation clears the cache at once: in this process, and in every other one through
 * the deployment's broadcast (`connect`: PostgreSQL LISTEN/NOTIFY or Redis pub/sub); `ttlMs`
 * stays the bound should a broadcast be lost (docs/operations.md).
 * Keyed by the bearer token itself, so a hit costs no hashing: the tokens live in this
 * process's memory only, as they do while a request is served, and never reach storage or logs.
 */
/** What the cache needs of the deployment's broadcast (storage/broadcast.ts). */
export interface CacheBroadcast {
  publish(topic: string): Promise<void>;
  subscribe(topic: string, fn: () => void): void;
}

export class PrincipalCache {
  private readonly entries = new Map<string, { principal: Principal; until: number }>();
  /** Moves on at every clear: a principal read before a clear is not cached after it. */
  private generation = 0;
  private broadcast: CacheBroadcast | undefined;

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

  /** The current generation: read it before looking a token up, give it to `set`. */
  get epoch(): number {
    return this.generation;
  }

  /** Caches a principal read in generation `epoch`; nothing when a clear came in between. */
  set(token: string, principal: Principal, nowMs: number, epoch = this.generation): void {
    if (this.ttlMs <= 0 || epoch !== this.generation) return;
    if (this.entries.size >= this.maxEntries) {
      // Oldest first: Map iterates in insertion order.
      const oldest = this.entries.keys().next();
      if (oldest.done !== true) this.entries.delete(oldest.value);
    }
    this.entries.set(token, { principal, until: nowMs + this.ttlMs });
  }

  /** Hears every other process's clears, and tells them of this one's. */
  connect(broadcast: CacheBroadcast): void {
    this.broadcast = broadcast;
    broadcast.subscribe('principals', () => this.forget());
  }

  /**
   * Forgets everything, here and in every other process: after any revocation, role or account
   * change. Resolves once the news is out (see Broadcast.publish).
   */
  async clear(): Promise<void> {
    this.forget();
    await this.broadcast?.publish('principals');
  }

  private forget(): void {
    this.entries.clear();
    this.generation++;
  }
}
