// A cache that several processes forget together. Each process keeps its own entries; any of
// them may announce that something cached changed (a revocation), and then every process drops
// its entries at once. The announcement goes through the deployment's broadcast (PostgreSQL
// LISTEN/NOTIFY or Redis pub/sub, storage/broadcast.ts); the caller's own freshness rules (a
// time to live, a validity period) stay the bound should an announcement be lost.

/** What a shared cache needs of the deployment's broadcast (storage/broadcast.ts). */
export interface CacheBroadcast {
  publish(topic: string): Promise<void>;
  subscribe(topic: string, fn: () => void): void;
}

/**
 * Entries by string key, at most `maxEntries` (the oldest goes first), forgotten everywhere by
 * `clear()`. A generation counter moves on at every clear: a value read from storage before a
 * clear is not cached after it (read `epoch` before the read, give it to `set`).
 */
export class SharedCache<V> {
  private readonly entries = new Map<string, V>();
  private generation = 0;
  private broadcast: CacheBroadcast | undefined;

  constructor(
    /** The broadcast topic: every process caching the same thing uses the same one. */
    private readonly topic: string,
    private readonly maxEntries = 10_000,
  ) {}

  get(key: string): V | undefined {
    return this.entries.get(key);
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  /** The current generation: read it before reading what will be cached, give it to `set`. */
  get epoch(): number {
    return this.generation;
  }

  /** Caches a value read in generation `epoch`; nothing when a clear came in between. */
  set(key: string, value: V, epoch = this.generation): void {
    if (epoch !== this.generation) return;
    // A value set again becomes the newest; the oldest goes first (a Map iterates in insertion order).
    if (!this.entries.delete(key) && this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (oldest.done !== true) this.entries.delete(oldest.value);
    }
    this.entries.set(key, value);
  }

  /** Hears every other process's clears, and tells them of this one's. */
  connect(broadcast: CacheBroadcast): void {
    this.broadcast = broadcast;
    broadcast.subscribe(this.topic, () => this.forget());
  }

  /** Forgets everything, here and in every other process; resolves once the news is out (Broadcast.publish). */
  async clear(): Promise<void> {
    this.forget();
    await this.broadcast?.publish(this.topic);
  }

  private forget(): void {
    this.entries.clear();
    this.generation++;
  }
}
