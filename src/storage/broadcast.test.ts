// The LISTEN connection of the PostgreSQL broadcast, lost in the ways a network loses it. A path
// a NAT or a load balancer drops without a word (no FIN, no RST) looks alive to both ends: the
// connection's round trips find it. A connection lost while it asks to LISTEN, or whose LISTEN is
// refused, is closed and replaced by exactly one. A real TCP relay on loopback stands between the
// listener and PostgreSQL and does to the listener's traffic what such a path would.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { scratchPostgresDatabase } from '../../test/support/databases.js';
import { sleep } from '../../test/support/processes.js';
import { startTcpRelay, type RelayedConnection } from '../../test/support/tcp-relay.js';
import { postgresBroadcast, type Broadcast } from './broadcast.js';
import { openDatabase, type Db } from './database.js';

const url = process.env.CERTDESK_TEST_DATABASE_URL;
if (url === undefined || url === '')
  console.warn(
    'broadcast connection tests not run: they are PostgreSQL only and CERTDESK_TEST_DATABASE_URL is not set',
  );

/** What the relay does to the next LISTEN it carries: cut the connection, or spoil the statement (the server refuses it). */
type ListenFault = 'cut' | 'refuse';

interface Relay {
  readonly url: string;
  /** Every connection carried (`blackholed`: what either end sends is dropped, and nothing is closed). */
  readonly pairs: RelayedConnection[];
  /** The connections that asked to LISTEN. */
  readonly listening: Set<RelayedConnection>;
  nextListen: ListenFault | undefined;
  close(): Promise<void>;
}

async function startRelay(target: string): Promise<Relay> {
  const listening = new Set<RelayedConnection>();
  const faults: { nextListen: ListenFault | undefined } = { nextListen: undefined };
  const tcp = await startTcpRelay(new URL(target), 5432, (chunk, connection) => {
    const at = chunk.indexOf('LISTEN');
    if (at < 0) return chunk;
    const fault = faults.nextListen;
    faults.nextListen = undefined;
    if (fault === 'cut') return 'cut';
    if (fault === 'refuse') {
      const spoiled = Buffer.from(chunk);
      spoiled[at + 5] = 'X'.charCodeAt(0); // LISTEX: a syntax error, the connection stays up
      return spoiled;
    }
    listening.add(connection);
    return chunk;
  });
  const relayed = new URL(target);
  relayed.host = tcp.host;
  return Object.assign(faults, {
    url: relayed.toString(),
    pairs: tcp.connections,
    listening,
    close: () => tcp.close(),
  });
}

/** Polls `check` until it holds; the generous limit only keeps a broken build from hanging. */
async function until(check: () => boolean, what: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(20);
  }
}

const openPairs = (relay: Relay) => relay.pairs.filter((p) => p.open).length;
const listener = (relay: Relay) => relay.pairs.find((p) => p.open && relay.listening.has(p) && !p.blackholed);
/** Longer than the broadcast's pause before it tries again (1 s), twice over. */
const RETRIES_SETTLE_MS = 3_000;

describe.skipIf(url === undefined || url === '')('postgresBroadcast, its LISTEN connection lost', () => {
  let scratch: Awaited<ReturnType<typeof scratchPostgresDatabase>>;
  let db: Db;
  /** Another process: announces through the pool and listens directly, not through the relay. */
  let other: Broadcast;
  const cleanup: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    scratch = await scratchPostgresDatabase(url!);
    db = await openDatabase({ url: scratch.url, poolSize: 2 });
    other = await postgresBroadcast(db, scratch.url);
  });
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step();
  });
  afterAll(async () => {
    await other?.close();
    await db?.close();
    await scratch?.drop();
  });

  const relayed = async () => {
    const relay = await startRelay(scratch.url);
    cleanup.push(() => relay.close());
    return relay;
  };

  it('ok/a path cut silently is noticed by the round trips, the connection replaced and the caches cleared, twice', async () => {
    const relay = await relayed();
    const errors: { at: number; err: Error; listening: boolean | undefined }[] = [];
    const heartbeatMs = 1_000;
    let broadcast: Broadcast | undefined = undefined;
    broadcast = await postgresBroadcast(db, relay.url, {
      heartbeatMs,
      onError: (err) => errors.push({ at: Date.now(), err, listening: broadcast?.listening() }),
    });
    cleanup.push(() => broadcast.close());
    expect(broadcast.transport).toBe('postgres');
    expect(broadcast.listening()).toBe(true);
    let cleared = 0;
    broadcast.subscribe('principals', () => cleared++);
    await other.publish('principals');
    await until(() => cleared === 1, 'the news before any cut');

    for (const round of [1, 2]) {
      const cut = listener(relay)!;
      const before = cleared;
      const cutAt = Date.now();
      cut.blackholed = true;
      // A revocation the cut path does not carry.
      await other.publish('principals');
      await until(() => errors.length === round, `round ${round}: the silent loss noticed`);
      expect(errors[round - 1]!.err.message).toMatch(/no answer within/);
      // Not listening from the loss on (what /readyz reports), until the new connection listens.
      expect(errors[round - 1]!.listening).toBe(false);
      // Two intervals at most (the cut just after an answer); a slow machine gets its margin.
      expect(errors[round - 1]!.at - cutAt).toBeLessThan(2 * heartbeatMs + 10_000);
      await until(() => !cut.open, `round ${round}: the dead connection closed by the listener`);
      await until(() => listener(relay) !== undefined, `round ${round}: a new LISTEN connection`);
      await until(() => cleared > before, `round ${round}: the caches cleared once it is back`);
      // The news reach it again.
      const back = cleared;
      await other.publish('principals');
      await until(() => cleared > back, `round ${round}: the news after the reconnection`);
      expect(broadcast.listening()).toBe(true);
      expect(openPairs(relay)).toBe(1);
    }
  });

  it('fail/closed while a new connection opens through a proxy that never answers, its goodbye neither: close() does not wait for it', async () => {
    const tcp = await startTcpRelay(new URL(scratch.url), 5432, undefined, undefined, { hungProxy: true });
    cleanup.push(() => tcp.close());
    const through = new URL(scratch.url);
    through.host = tcp.host;
    // A long heartbeat: the new connection is still opening when close() comes.
    const broadcast = await postgresBroadcast(db, through.toString(), {
      heartbeatMs: 30_000,
      onError: () => undefined,
    });
    tcp.blackholeNew = true;
    tcp.connections[0]!.client.destroy();
    await until(() => tcp.connections.length >= 2, 'a new connection opening (1 s after the loss)');
    const closed = await Promise.race([broadcast.close().then(() => 'closed'), sleep(10_000).then(() => 'hung')]);
    expect(closed).toBe('closed');
  });

  it.each<ListenFault>(['cut', 'refuse'])(
    'fail/a LISTEN that fails (%s) after a loss leaves one connection listening, and none after close',
    async (fault) => {
      const relay = await relayed();
      const broadcast = await postgresBroadcast(db, relay.url, { onError: () => undefined });
      let cleared = 0;
      broadcast.subscribe('principals', () => cleared++);
      relay.nextListen = fault;
      // A loud loss first (the server's side closes), then the next try fails at its LISTEN.
      const first = listener(relay)!;
      first.client.destroy();
      await until(() => relay.pairs.length >= 2 && relay.nextListen === undefined, 'the failing LISTEN tried');
      await until(() => listener(relay) !== undefined, 'listening again');
      await until(() => cleared > 0, 'the caches cleared once it is back');
      await sleep(RETRIES_SETTLE_MS);
      expect(openPairs(relay)).toBe(1);
      const back = cleared;
      await other.publish('principals');
      await until(() => cleared > back, 'the news reach it');
      await broadcast.close();
      await until(() => openPairs(relay) === 0, 'every connection closed after close()');
    },
  );

  it.each<ListenFault>(['cut', 'refuse'])(
    'fail/a first LISTEN that fails (%s) throws and leaves no connection and no retry behind',
    async (fault) => {
      const relay = await relayed();
      relay.nextListen = fault;
      await expect(postgresBroadcast(db, relay.url, { onError: () => undefined })).rejects.toThrow();
      await until(() => openPairs(relay) === 0, 'the failed connection closed');
      await sleep(RETRIES_SETTLE_MS);
      expect(relay.pairs).toHaveLength(1);
    },
  );
});
