// A statement whose answer is overdue (`queryTimeoutMs`, pg's query_timeout): pg fails it and
// destroys its connection. Two things more are needed: the failure must reach the caller only
// once pg has seen the connection end, and the server must stop the statement.
import { connect } from 'node:net';
import type pg from 'pg';
import type { Query } from './pg-connection.js';
import { tooSlow } from './unavailable.js';

/** How long sending a cancel request may take (the path to the server may be the one gone silent). */
const CANCEL_WITHIN_MS = 5_000;

/**
 * `query`, whose failure for an answer overdue is reported only once pg has closed the connection,
 * and whose statement is cancelled on the server. pg fails the statement first and closes the
 * connection it destroyed a moment later: reported at once, the statement's caller handed the
 * connection back to the pool while it still looked usable, and the next statement given it
 * failed too. And a server that is slow, not gone (a statement waiting for a lock, a long
 * scan), ran the statement on after the connection was dropped: its backend reads nothing
 * while it runs, so it kept its locks, a write answered 503 committed later, and each such
 * request left a backend behind, past the pool's size.
 */
export function answeredInTime(
  client: pg.PoolClient,
  query: Query,
  stream: { destroyed?: boolean } | undefined,
): Query {
  const closed = new Promise<void>((resolve) => client.once('end', () => resolve()));
  return (...args) => {
    const answer = query(...args);
    if (!(answer instanceof Promise)) return answer;
    return answer.catch(async (e: unknown) => {
      // Not destroyed: pg gave up on a statement it had not written yet, and the connection is sound.
      if (tooSlow(e) && stream?.destroyed === true) {
        cancelOnServer(client);
        await closed;
      }
      throw e;
    });
  };
}

/**
 * Asks the server to cancel what `client`'s backend runs: PostgreSQL's CancelRequest, on a
 * connection of its own, naming the backend by the key it gave the client at the start (a pooler
 * such as PgBouncer passes it on to the backend it mapped). A backend whose statement is cancelled
 * answers on the dropped connection, finds it gone, and ends, rolling back its transaction. Sent
 * and forgotten: the server does not answer it, and on a path that is gone it fails quietly.
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
  socket.setTimeout(CANCEL_WITHIN_MS, () => socket.destroy());
  socket.unref();
  socket.on('error', () => undefined);
  socket.on('connect', () => socket.end(request));
}
