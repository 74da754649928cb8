// A statement whose answer is overdue (`queryTimeoutMs`): first the server is asked to cancel it,
// on the connection that is still open; only if no answer comes within a grace (the path is gone,
// not slow) does pg's own query_timeout drop the connection.
import { connect } from 'node:net';
import type pg from 'pg';
import type { Query } from './pg-connection.js';
import { fromServer, tooSlow } from './unavailable.js';

/**
 * How long after the cancel request the connection is dropped if the server has not answered:
 * pg's query_timeout is the bound plus this. A server that is there answers a cancel at once.
 */
export const CANCEL_GRACE_MS = 2_000;
/** How long the connection of a cancel request may stay open (the server closes it when done). */
const CANCEL_WITHIN_MS = 5_000;

/** Statements of a connection waiting for their answers: when each was written, oldest first. */
interface Waiting {
  readonly client: pg.PoolClient;
  readonly cancelAfterMs: number;
  readonly written: number[];
  /** When the statement last cancelled was written (one cancel per statement). */
  cancelled: number;
}
/** Every connection with a statement waiting, looked over every SWEEP_MS. */
const waiting = new Set<Waiting>();
/** How often the statements waiting are looked over: the cancel comes up to this late. */
const SWEEP_MS = 250;
let sweeper: NodeJS.Timeout | undefined;

/**
 * Sends a cancel for each connection whose oldest waiting statement is overdue. One sweep for the
 * process rather than a timer per statement: a 30 s timer set and cleared for each of an order's
 * statements cost PostgreSQL inline orders ~15 % of their rate (bench, alternated: 310-389 against
 * 363-419 orders/s without it), though each pair costs well under a microsecond alone.
 */
function sweep(): void {
  const now = performance.now();
  for (const w of waiting) {
    const oldest = w.written[0];
    if (oldest !== undefined && oldest !== w.cancelled && now - oldest >= w.cancelAfterMs) {
      w.cancelled = oldest;
      cancelOnServer(w.client);
    }
  }
}

/**
 * When each connection of a pool was last heard from, and since when a path of the pool has been
 * known silent. A connection dropped for lost (no answer, not even to the cancel) most likely
 * shares its fate with every connection idle in the pool since its statement was written: a NAT
 * or load balancer that forgot its flows, a failover whose old server vanished without a word.
 * Handed out, each of those cost a request the whole bound and the grace in turn, up to the
 * pool's size; `handingOutHeard` closes them instead, and the pool opens new ones.
 */
export class SilentPaths {
  #since = Number.NEGATIVE_INFINITY;
  readonly #connections = new WeakMap<pg.PoolClient, Heard>();

  /** `client`, connected now: the record its answers update (`Heard.at`). */
  track(client: pg.PoolClient): Heard {
    const heard = { at: performance.now() };
    this.#connections.set(client, heard);
    return heard;
  }

  /** A statement written at `written` (performance.now()) was never answered, and its connection dropped. */
  lost(written: number): void {
    if (written > this.#since) this.#since = written;
  }

  /** Not heard from since a statement of the pool went unanswered. */
  suspect(client: pg.PoolClient): boolean {
    return (this.#connections.get(client)?.at ?? Number.NEGATIVE_INFINITY) < this.#since;
  }
}

/**
 * When a connection was last heard from: the write time of the last statement answered (the
 * answer came later; one a little old only makes the connection look suspect sooner), so that an
 * answer costs a property's store.
 */
interface Heard {
  at: number;
}

/**
 * `pool`, whose `connect` hands out only connections heard from since the pool last lost one
 * (the SilentPaths returned, for its connections' statements to report to): it closes the others
 * as it meets them, and the pool opens new ones. One comparison per checkout.
 */
export function handingOutHeard(pool: pg.Pool): SilentPaths {
  const paths = new SilentPaths();
  const connect = pool.connect.bind(pool);
  pool.connect = ((...args: unknown[]) => {
    // pg's own callback form (pool.query), which the service does not use, is left as it is.
    if (args.length > 0) return (connect as (...a: unknown[]) => unknown)(...args);
    return (async () => {
      for (;;) {
        const client = await connect();
        if (!paths.suspect(client)) return client;
        dropSocket(client);
        client.release(true);
      }
    })();
  }) as typeof pool.connect;
  return paths;
}

/**
 * `query`, whose statements are cancelled on the server once `cancelAfterMs` have passed without
 * their answer (0: never), and whose failure for an answer overdue past the grace is reported
 * only once pg has closed the connection it dropped.
 *
 * Dropping the connection alone left a server that is slow, not gone (a statement waiting for a
 * lock), running the statement on: its backend reads nothing meanwhile, so it kept its locks, a
 * write answered 503 committed later, and each such request left a backend behind, past the
 * pool's size. Cancelled, the statement fails with 57014 on a connection that stays (answered
 * 503 "did not answer in time" all the same). The cancel is sent while the connection is open:
 * a pooler (PgBouncer) matches it to the client's key and drops one for a client already gone.
 *
 * pg fails an overdue statement before the connection it destroyed has closed: reported at once,
 * the statement's caller handed the connection back to the pool while it still looked usable,
 * and the next statement given it failed too.
 */
export function answeredInTime(
  client: pg.PoolClient,
  query: Query,
  stream: { destroyed?: boolean } | undefined,
  cancelAfterMs: number,
  paths?: SilentPaths,
): Query {
  const heard = paths?.track(client);
  const closed = new Promise<void>((resolve) => client.once('end', () => resolve()));
  const w: Waiting = { client, cancelAfterMs, written: [], cancelled: -1 };
  // A connection answers its statements in the order they were written (pipelined or not).
  const answered = () => {
    w.written.shift();
    if (w.written.length === 0) waiting.delete(w);
  };
  return (...args) => {
    const answer = query(...args);
    if (!(answer instanceof Promise)) return answer;
    const written = performance.now();
    if (cancelAfterMs > 0) {
      w.written.push(written);
      waiting.add(w);
      sweeper ??= setInterval(sweep, SWEEP_MS).unref();
    }
    return answer.then(
      (result) => {
        if (cancelAfterMs > 0) answered();
        if (heard !== undefined) heard.at = written;
        return result;
      },
      async (e: unknown) => {
        if (cancelAfterMs > 0) answered();
        // Not destroyed: pg gave up on a statement it had not written yet, and the connection is sound.
        if (tooSlow(e) && stream?.destroyed === true) {
          paths?.lost(written);
          await closed;
        } else if (heard !== undefined && fromServer(e)) heard.at = written;
        throw e;
      },
    );
  };
}

/**
 * Drops `client`'s socket: on a path that carries nothing pg's goodbye (`end`) is never answered,
 * and the socket, and a pool's slot, would wait for TCP to give up.
 */
export function dropSocket(client: pg.ClientBase): void {
  (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
}

/**
 * Asks the server to cancel what `client`'s backend runs: PostgreSQL's CancelRequest, on a
 * connection of its own, naming the backend by the key it gave the client at the start. Sent as
 * libpq long did, unencrypted (the key is single-use in effect: it names one backend); a proxy
 * that routes by TLS name drops it, and the connection is dropped after the grace instead. The
 * socket is left open until the server closes it (a half-close made PgBouncer 1.18 drop the
 * request, or end), and forgotten: nothing is answered, and on a path that is gone it fails
 * quietly.
 */
export function cancelOnServer(client: pg.PoolClient): void {
  const { processID, secretKey, host, port } = client as unknown as {
    processID: number | null;
    secretKey: number | null;
    host: string;
    port: number;
  };
  if (processID === null || secretKey === null) return;
  const request = Buffer.alloc(16);
  request.writeInt32BE(16, 0);
  request.writeInt32BE(80877102, 4);
  request.writeInt32BE(processID, 8);
  request.writeInt32BE(secretKey, 12);
  const socket = host.startsWith('/') ? connect(`${host}/.s.PGSQL.${port}`) : connect(port, host);
  socket.unref();
  socket.setTimeout(CANCEL_WITHIN_MS, () => socket.destroy());
  socket.on('error', () => undefined);
  socket.on('data', () => undefined);
  socket.on('connect', () => socket.write(request));
}
