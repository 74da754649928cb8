import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { sql } from 'kysely';
import { KEEPALIVE_AFTER_MS, type Db } from './database.js';

// Several `serve` and `worker` processes share one database; what one of them caches (resolved
// tokens) must be forgotten by all when another changes it. A Broadcast carries such news to
// every process: PostgreSQL LISTEN/NOTIFY, or Redis pub/sub when CERTDESK_REDIS_URL is set, or,
// for one process on SQLite, nothing but the process itself.

/** Tells every process of a deployment (this one too) that something cached must be forgotten. */
export interface Broadcast {
  /**
   * Announces `topic` to every process. Resolves once this process has heard its own
   * announcement back (so every listener on the same server has been sent it), or after
   * `echoTimeoutMs` at most: the caches' time-to-live stays the safety net. Never rejects: the
   * change it announces is committed, and a request must not fail after its commit because the
   * news could not be sent (Redis down, say). Such a failure goes to the transport's `onError`;
   * the other processes then forget by their caches' own bounds (the principal cache's seconds,
   * OCSP_MEMORY_SECONDS), or at once when their own connection, lost too, is back.
   */
  publish(topic: string): Promise<void>;
  /** Calls `fn` whenever any process announces `topic`, and after a lost connection is back (news may have been missed). */
  subscribe(topic: string, fn: () => void): void;
  /** How the news travels: this process only (SQLite without Redis), PostgreSQL, or Redis. */
  readonly transport: 'local' | 'postgres' | 'redis';
  /**
   * Whether this process hears the others now: false while its listening connection is lost and
   * being opened again (their changes then reach it by its caches' bounds only). Always true for
   * `local`.
   */
  listening(): boolean;
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

  /** Sends `topic` with `send` and waits for its echo; a failed send is reported to `onError`, not thrown. */
  async announce(topic: string, send: (text: string) => Promise<unknown>, onError?: (err: Error) => void) {
    const { text, echo } = this.message(topic);
    try {
      await send(text);
    } catch (err) {
      // Its echo's wait ends on its own timer.
      onError?.(err as Error);
      return;
    }
    await echo;
  }

  /** A message for `topic` and a promise of its echo, resolved when it comes back or after `echoTimeoutMs`. */
  message(topic: string): { text: string; echo: Promise<void> } {
    return this.echoed(topic, this.echoTimeoutMs, (resolve) => resolve());
  }

  /**
   * A message that only proves the way back (topic `heartbeat`, which nobody subscribes to):
   * `heard` resolves when it comes back, and rejects after `ms`.
   */
  probe(ms: number): { text: string; heard: Promise<void> } {
    const { text, echo } = this.echoed('heartbeat', ms, (_resolve, reject) =>
      reject(new Error(`no answer within ${ms} ms: a notification sent did not come back`)),
    );
    return { text, heard: echo };
  }

  private echoed(
    topic: string,
    ms: number,
    late: (resolve: () => void, reject: (e: Error) => void) => void,
  ): { text: string; echo: Promise<void> } {
    const id = `${this.sender}.${++this.seq}`;
    const echo = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        late(resolve, reject);
      }, ms);
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
    transport: 'local',
    listening: () => true,
    async close() {},
  };
}

/** The channel of a database: its schema's, so deployments (and test suites) sharing a server stay apart. */
const channelOf = (db: Pick<Db, 'schema'>) => `certdesk_${db.schema ?? 'public'}`;

/**
 * How often the listening connection must hear a notification sent through the pool, as the
 * other processes send theirs, and how long that (or opening it and its LISTEN) may take. A path
 * that a NAT or a load balancer dropped without a word (no FIN, no RST) looks alive to both ends,
 * and a LISTEN through a pooler in transaction mode is accepted and then hears (almost) nothing;
 * unheard, the connection is counted lost. A cut just after a beat is noticed at the next one's
 * end: within two intervals, 10 s.
 */
export const HEARTBEAT_MS = 5_000;
/** The pause before a lost listening connection is opened again (and between tries). */
const RETRY_MS = 1_000;
/** How long closing waits for the server's goodbye before it drops the connection. */
const GOODBYE_MS = 1_000;

/** `work`, or a rejection once `ms` have passed without it settling. */
function withinTime<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/**
 * PostgreSQL LISTEN/NOTIFY: one dedicated connection listens, proving it is alive with a round
 * trip every `heartbeatMs` (HEARTBEAT_MS); announcing is one `pg_notify` on the pool. A lost
 * connection (an error, a refused LISTEN, a round trip unanswered in time) is destroyed and
 * opened again a second later, with retries until it is back; then every subscriber forgets,
 * since news may have been missed. Throws if the first connection cannot listen.
 */
export async function postgresBroadcast(
  db: Db,
  url: string,
  options: { echoTimeoutMs?: number; heartbeatMs?: number; onError?: (err: Error) => void } = {},
): Promise<Broadcast> {
  const hub = new Hub(options.echoTimeoutMs ?? 1000);
  const channel = channelOf(db);
  const heartbeatMs = options.heartbeatMs ?? HEARTBEAT_MS;
  let closed = false;
  // pg is loaded by the processes on PostgreSQL only (database.ts).
  const { Client } = (await import('pg')).default;
  let started = false;
  let retry: NodeJS.Timeout | undefined;
  // The connection open or opening: never two, since a new one opens only after this one's loss.
  let live: { end(): Promise<void> } | undefined;
  // The live connection has its LISTEN in place.
  let listening = false;

  const listen = async (): Promise<void> => {
    // Keepalive as on the pool's connections (database.ts); the round trips find a dead path sooner.
    const c = new Client({
      connectionString: url,
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_AFTER_MS,
    });
    let beat: NodeJS.Timeout | undefined;
    let gone = false;
    const leave = () => {
      gone = true;
      clearTimeout(beat);
      if (live === self) {
        live = undefined;
        listening = false;
      }
    };
    // Every loss of this connection ends here, once, however many of its signs come: destroyed,
    // not ended politely (a dead path never answers a goodbye), and, after the first start, a
    // new one in RETRY_MS.
    const lost = (err: Error) => {
      if (gone) return;
      leave();
      void c.end().catch(() => undefined);
      c.connection.stream.destroy();
      if (closed || !started) return;
      options.onError?.(err);
      if (retry === undefined) {
        retry = setTimeout(reconnect, RETRY_MS);
        retry.unref();
      }
    };
    const self = {
      async end() {
        if (gone) return;
        leave();
        // Politely, for a server that answers; one that never does (a hung proxy, a connection
        // still opening through it) is not waited for: pg's end() waits for its goodbye for ever.
        let timer: NodeJS.Timeout | undefined;
        const waited = new Promise((resolve) => (timer = setTimeout(resolve, GOODBYE_MS)));
        await Promise.race([c.end().catch(() => undefined), waited]);
        clearTimeout(timer);
        c.connection.stream.destroy();
      },
    };
    live = self;
    c.on('notification', (n) => {
      if (n.channel === channel && n.payload !== undefined) hub.deliver(n.payload);
    });
    c.on('error', lost);
    // A notification through the pool, heard back on this connection: the way every other
    // process's news travel. (Promise.all handles `heard` failing after the send did.)
    const hearsTheOthers = () => {
      const { text, heard } = hub.probe(heartbeatMs);
      const sent = sql`select pg_notify(${channel}, ${text})`.execute(db.kysely);
      return withinTime(Promise.all([sent, heard]), heartbeatMs, 'the LISTEN connection');
    };
    const opening = (async () => {
      await c.connect();
      await c.query(`LISTEN "${channel}"`);
    })();
    try {
      await withinTime(opening, heartbeatMs, 'opening the LISTEN connection');
      await hearsTheOthers().catch((err: Error) => {
        throw new Error(
          `the LISTEN connection hears no notifications (${err.message}). Behind a connection pooler in transaction mode LISTEN cannot work: set CERTDESK_REDIS_URL, or connect to PostgreSQL directly`,
        );
      });
    } catch (err) {
      lost(err as Error);
      throw err;
    }
    if (gone) throw new Error('the LISTEN connection was lost or closed as it opened');
    started = true;
    listening = true;
    const probe = () => {
      beat = setTimeout(() => {
        hearsTheOthers().then(() => {
          if (!gone) probe();
        }, lost);
      }, heartbeatMs);
      beat.unref();
    };
    probe();
  };
  const reconnect = () => {
    retry = undefined;
    if (closed) return;
    // A failure has been reported, and the next try scheduled, by the connection's `lost`.
    listen().then(
      () => hub.deliverAll(),
      () => undefined,
    );
  };
  await listen();
  return {
    publish: (topic) =>
      hub.announce(topic, (text) => sql`select pg_notify(${channel}, ${text})`.execute(db.kysely), options.onError),
    subscribe: (topic, fn) => hub.subscribe(topic, fn),
    transport: 'postgres',
    listening: () => listening,
    async close() {
      closed = true;
      clearTimeout(retry);
      hub.release();
      await live?.end();
    },
  };
}

/**
 * Proves a Redis connection alive with a PING every `intervalMs` (HEARTBEAT_MS), answered within
 * as long (and within the client's own command timeout, if it has one). ioredis notices a closed
 * connection, but not a path dropped without a word (a NAT or a load balancer that forgot the
 * flow): every command on it fails by its timeout, and a subscriber hears nothing, until TCP
 * keepalive gives up minutes later. After `misses` unanswered PINGs in a row the connection is
 * dropped and ioredis opens a new one. Skipped while the connection is not ready (ioredis is at
 * it). Returns the stop.
 */
export function redisHeartbeat(
  client: Redis,
  onLost: (err: Error) => void,
  options: { intervalMs?: number; misses?: number } = {},
): () => void {
  const intervalMs = options.intervalMs ?? HEARTBEAT_MS;
  let beat: NodeJS.Timeout | undefined;
  let stopped = false;
  let missed = 0;
  let connectedBeats = 0;
  const miss = (err: Error) => {
    if (stopped) return;
    if (++missed >= (options.misses ?? 1)) {
      missed = 0;
      onLost(err);
      // Dropped and opened again (ioredis's own reconnection).
      client.disconnect(true);
    }
    next();
  };
  const next = () => {
    if (stopped) return;
    beat = setTimeout(() => {
      // Connected but not ready at two beats in a row (its first command unanswered) is a miss
      // too: ioredis would wait on it for good. Connecting has its own timeout, and reconnecting
      // is ioredis at work.
      connectedBeats = client.status === 'connect' ? connectedBeats + 1 : 0;
      if (connectedBeats >= 2) {
        connectedBeats = 0;
        return miss(new Error('Redis: connected, but no answer to its first command'));
      }
      if (client.status !== 'ready') return next();
      withinTime(client.ping(), intervalMs, 'Redis').then(() => {
        missed = 0;
        next();
      }, miss);
    }, intervalMs);
    beat.unref();
  };
  next();
  return () => {
    stopped = true;
    clearTimeout(beat);
  };
}

/**
 * Redis pub/sub (CERTDESK_REDIS_URL) on `channel`: a subscriber connection of its own, which
 * ioredis opens again when it closes and `redisHeartbeat` when its path dies silently. It
 * subscribes on every (re)connection itself, and only once that is answered does it count as
 * listening; then every subscriber forgets, since news may have been missed meanwhile. Its
 * commands have no timeout of their own (the publisher's would turn a slow SUBSCRIBE after a
 * reconnection into an unhandled rejection): the heartbeat's deadline bounds them.
 */
export async function redisBroadcast(
  publisher: Redis,
  channel: string,
  options: { echoTimeoutMs?: number; heartbeatMs?: number; onError?: (err: Error) => void } = {},
): Promise<Broadcast> {
  const hub = new Hub(options.echoTimeoutMs ?? 1000);
  const heartbeatMs = options.heartbeatMs ?? HEARTBEAT_MS;
  const subscriber = publisher.duplicate({ autoResubscribe: false, commandTimeout: undefined });
  const onError = (err: Error) => options.onError?.(err);
  subscriber.on('error', onError);
  subscriber.on('message', (from: string, text: string) => {
    if (from === channel) hub.deliver(text);
  });
  let subscribed = false;
  let first = true;
  const subscribe = async () => {
    await withinTime(subscriber.subscribe(channel), heartbeatMs, 'subscribing to the Redis broadcast');
    subscribed = true;
    if (!first) hub.deliverAll();
    first = false;
  };
  subscriber.on('close', () => {
    subscribed = false;
  });
  subscriber.on('ready', () => {
    if (first) return; // the first subscription is made below
    subscribe().catch((err: Error) => {
      onError(err);
      subscriber.disconnect(true);
    });
  });
  try {
    await subscribe();
  } catch (err) {
    subscriber.disconnect();
    throw err;
  }
  const stopBeat = redisHeartbeat(subscriber, onError, { intervalMs: heartbeatMs });
  return {
    publish: (topic) => hub.announce(topic, (text) => publisher.publish(channel, text), options.onError),
    subscribe: (topic, fn) => hub.subscribe(topic, fn),
    transport: 'redis',
    listening: () => subscribed && subscriber.status === 'ready',
    async close() {
      stopBeat();
      hub.release();
      subscriber.disconnect();
    },
  };
}
