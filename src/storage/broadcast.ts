import { sql } from 'kysely';
import { withinTime } from '../core/index.js';
import { HEARTBEAT_MS, Hub } from './broadcast-hub.js';
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

/** The pause before a lost listening connection is opened again (and between tries). */
const RETRY_MS = 1_000;
/** How long closing waits for the server's goodbye before it drops the connection. */
const GOODBYE_MS = 1_000;

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
