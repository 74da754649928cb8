// The LISTEN connection of the PostgreSQL broadcast, lost in the ways a network loses it. A path
// a NAT or a load balancer drops without a word (no FIN, no RST) looks alive to both ends: the
// connection's round trips find it. A connection lost while it asks to LISTEN, or whose LISTEN is
// refused, is closed and replaced by exactly one. A real TCP relay on loopback stands between the
// listener and PostgreSQL and does to the listener's traffic what such a path would.
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { scratchPostgresDatabase } from '../../test/support/databases.js';
import { sleep } from '../../test/support/processes.js';
import { postgresBroadcast, type Broadcast } from './broadcast.js';
import { openDatabase, type Db } from './database.js';

const url = process.env.CERTDESK_TEST_DATABASE_URL;
if (url === undefined || url === '')
  console.warn(
    'broadcast connection tests not run: they are PostgreSQL only and CERTDESK_TEST_DATABASE_URL is not set',
  );

/** One connection through the relay: `blackholed`, what either end sends is dropped, and nothing is closed. */
interface Pair {
  readonly client: Socket;
  listening: boolean;
  blackholed: boolean;
  open: boolean;
}

/** What the relay does to the next LISTEN it carries: cut the connection, or spoil the statement (the server refuses it). */
type ListenFault = 'cut' | 'refuse';

interface Relay {
  readonly url: string;
  readonly pairs: Pair[];
  nextListen: ListenFault | undefined;
  close(): Promise<void>;
}

async function startRelay(target: string): Promise<Relay> {
  const to = new URL(target);
  const pairs: Pair[] = [];
  const relay: Omit<Relay, 'url'> & { server?: Server } = {
    pairs,
    nextListen: undefined,
    close: async () => undefined,
  };
  const server = createServer((client) => {
    const upstream = createConnection(Number(to.port === '' ? 5432 : to.port), to.hostname);
    const pair: Pair = { client, listening: false, blackholed: false, open: true };
    pairs.push(pair);
    client.on('data', (chunk: Buffer) => {
      if (pair.blackholed) return;
      const at = chunk.indexOf('LISTEN');
      if (at >= 0) {
        const fault = relay.nextListen;
        relay.nextListen = undefined;
        if (fault === 'cut') {
          client.destroy();
          upstream.destroy();
          return;
        }
        if (fault === 'refuse') {
          chunk = Buffer.from(chunk);
          chunk[at + 5] = 'X'.charCodeAt(0); // LISTEX: a syntax error, the connection stays up
        } else pair.listening = true;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!pair.blackholed) client.write(chunk);
    });
    const end = () => {
      pair.open = false;
      client.destroy();
      upstream.destroy();
    };
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const relayed = new URL(target);
  relayed.hostname = '127.0.0.1';
  relayed.port = String((server.address() as { port: number }).port);
  return Object.assign(relay, {
    url: relayed.toString(),
    close: async () => {
      for (const p of pairs) p.client.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
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
const listener = (relay: Relay) => relay.pairs.find((p) => p.open && p.listening && !p.blackholed);
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
