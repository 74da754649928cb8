import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { sql } from 'kysely';
import pg from 'pg';
import type { Db } from './database.js';

// Several `serve` and `worker` processes share one database; what one of them caches (resolved
// tokens) must be forgotten by all when another changes it. A Broadcast carries such news to
// every process: PostgreSQL LISTEN/NOTIFY, or Redis pub/sub when CERTDESK_REDIS_URL is set, or,
// for one process on SQLite, nothing but the process itself.

/** Tells every process of a deployment (this one too) that something cached must be forgotten. */
export interface Broadcast {
  /**
   * Announces `topic` to every process. Resolves once this process has heard its own
   * announcement back (so every listener on the same server has been sent it), or after
   * `echoTimeoutMs` at most: the caches' time-to-live stays the safety net.
   */
  publish(topic: string): Promise<void>;
  /** Calls `fn` whenever any process announces `topic`, and after a lost connection is back (news may have been missed). */
  subscribe(topic: string, fn: () => void): void;
  close(): Promise<void>;
}

/** What every transport shares: the subscribers, and waiting for one's own announcement to come back. */
class Hub {
  private readonly subscribers = new Map<string, (() => void)[]>();
  private readonly waiting = new Map<string, () => void>();
  private seq = 0;
  readonly sender = randomBytes(6).toString('hex');

  constructor(private readonly echoTimeoutMs: number) {}

  subscribe(topic: string, fn: () => void): void {
    this.subscribers.set(topic, [...(this.subscribers.get(topic) ?? []), fn]);
  }

  /** A message for `topic` and a promise of its echo. */
  message(topic: string): { text: string; echo: Promise<void> } {
    const id = `${this.sender}.${++this.seq}`;
    const echo = new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        resolve();
      }, this.echoTimeoutMs);
      timer.unref();
      this.waiting.set(id, () => {
        clearTimeout(timer);
        resolve();
      });
    });
    return { text: `${topic} ${id}`, echo };
  }

  deliver(text: string): void {
    const [topic, id] = text.split(' ');
    for (const fn of this.subscribers.get(topic ?? '') ?? []) fn();
    if (id !== undefined) {
      this.waiting.get(id)?.();
      this.waiting.delete(id);
    }
  }

  /** After a reconnection: anything may have been missed, so every subscriber forgets. */
  deliverAll(): void {
    for (const fns of this.subscribers.values()) for (const fn of fns) fn();
  }

  /** Resolves everything still waiting (at close). */
  release(): void {
    for (const done of this.waiting.values()) done();
    this.waiting.clear();
  }
}

/** One process alone (SQLite without Redis): announcements reach this process's subscribers only. */
export function localBroadcast(): Broadcast {
  const hub = new Hub(0);
  return {
    async publish(topic) {
      hub.deliver(topic);
    },
    subscribe: (topic, fn) => hub.subscribe(topic, fn),
    async close() {},
  };
}

/** The channel of a database: its schema's, so deployments (and test suites) sharing a server stay apart. */
const channelOf = (db: Pick<Db, 'schema'>) => `certdesk_${db.schema ?? 'public'}`;

/**
 * PostgreSQL LISTEN/NOTIFY: one dedicated connection listens (and comes back after a lost
 * connection, telling every subscriber to forget, since news may have been missed); announcing
 * is one `pg_notify` on the pool.
 */
export async function postgresBroadcast(
  db: Db,
  url: string,
  options: { echoTimeoutMs?: number; onError?: (err: Error) => void } = {},
): Promise<Broadcast> {
  const hub = new Hub(options.echoTimeoutMs ?? 1000);
  const channel = channelOf(db);
  let client: pg.Client | undefined;
  let closed = false;
  const listen = async (): Promise<void> => {
    const c = new pg.Client({ connectionString: url });
    c.on('notification', (n) => {
      if (n.channel === channel && n.payload !== undefined) hub.deliver(n.payload);
    });
    c.on('error', (err) => {
      options.onError?.(err);
      if (client === c) client = undefined;
      void c.end().catch(() => undefined);
      if (!closed) setTimeout(() => void reconnect(), 1000).unref();
    });
    await c.connect();
    await c.query(`LISTEN "${channel}"`);
    client = c;
  };
  const reconnect = async () => {
    if (closed || client !== undefined) return;
    try {
      await listen();
      hub.deliverAll();
    } catch (err) {
      options.onError?.(err as Error);
      if (!closed) setTimeout(() => void reconnect(), 1000).unref();
    }
  };
  await listen();
  return {
    async publish(topic) {
      const { text, echo } = hub.message(topic);
      await sql`select pg_notify(${channel}, ${text})`.execute(db.kysely);
      await echo;
    },
    subscribe: (topic, fn) => hub.subscribe(topic, fn),
    async close() {
      closed = true;
      hub.release();
      await client?.end().catch(() => undefined);
    },
  };
}

/** Redis pub/sub (CERTDESK_REDIS_URL) on `channel`: a subscriber connection of its own; ioredis reconnects it. */
export async function redisBroadcast(
  publisher: Redis,
  channel: string,
  options: { echoTimeoutMs?: number; onError?: (err: Error) => void } = {},
): Promise<Broadcast> {
  const hub = new Hub(options.echoTimeoutMs ?? 1000);
  const subscriber = publisher.duplicate();
  subscriber.on('error', (err: Error) => options.onError?.(err));
  subscriber.on('message', (from: string, text: string) => {
    if (from === channel) hub.deliver(text);
  });
  let first = true;
  subscriber.on('ready', () => {
    if (!first) hub.deliverAll();
    first = false;
  });
  await subscriber.subscribe(channel);
  return {
    async publish(topic) {
      const { text, echo } = hub.message(topic);
      await publisher.publish(channel, text);
      await echo;
    },
    subscribe: (topic, fn) => hub.subscribe(topic, fn),
    async close() {
      hub.release();
      subscriber.disconnect();
    },
  };
}
