// Which failures of a database call are the database being out of reach or out of room, not a
// fault of the request or of certdesk: a restart, a failover, a cut network, too many
// connections, a SQLite file another process holds locked past the busy timeout. The web layer
// answers them 503 with Retry-After, not 500 (envelope.ts); a transaction whose COMMIT met one
// cannot tell whether it was kept (`inTransaction`), unless pg never sent it (`CommitNotSent`).

/** An error PostgreSQL itself reported (it carries a SQLSTATE and a severity), not a lost or refused connection. */
export function fromServer(e: unknown): e is { code: string; severity: string } {
  const { code, severity } = (e ?? {}) as { code?: unknown; severity?: unknown };
  return typeof code === 'string' && typeof severity === 'string';
}

/**
 * Connection exceptions (08; not 08P01, a protocol violation the server answered on a connection
 * that still works: a fault of the statement), operator intervention (57P: shutdown, crash,
 * cannot connect now), too many connections.
 */
export const CONNECTION_TROUBLE = /^(08(?!P01)|57P|53300)/;

/** A server out of resources: disk full, out of memory, too many connections (not 53400: a limit one query met). */
const OUT_OF_RESOURCES = /^53[123]00$/;

/** What the socket under a PostgreSQL connection reports when the server is gone or not reachable. */
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** pg's and pg-pool's own words for a connection lost, closed or not made (they carry no code). */
const PG_CONNECTION_MESSAGES =
  /^(Connection terminated|Client has encountered a connection error|Client was closed and is not queryable|timeout exceeded when trying to connect|Query read timeout|timeout expired)/;

/**
 * No answer in time: pg's bound on one (`queryTimeoutMs`; it drops the connection, `tooSlow`), or a bound the
 * server keeps: `statement_timeout` (57014, which is also an operator's pg_cancel_backend) or
 * `lock_timeout` (55P03; certdesk never asks for a lock with NOWAIT, which fails the same way).
 */
const TOO_SLOW = /^Query read timeout/;
const TOO_SLOW_CODES = new Set(['57014', '55P03']);

/** pg-pool: every connection busy for the whole connect timeout (the pool, not the server, is the limit). */
const POOL_BUSY = /^timeout exceeded when trying to connect/;

/** pg refusing a statement on a connection already lost or closed: nothing of it was written. */
const NOT_QUERYABLE = /is not queryable$/;

/** SQLite: the file locked by another process past busy_timeout (not SQLITE_LOCKED: a conflict within one connection), or no room left. */
const SQLITE_CODES = /^SQLITE_(BUSY|FULL)/;

/**
 * A COMMIT that was never written: its connection was lost, or closed, before it. Nothing of the
 * transaction was kept (the server ends it with the connection), so whether it was is certain.
 */
export class CommitNotSent extends Error {
  constructor(cause: unknown) {
    super('the COMMIT was not sent: its connection was gone before it', { cause });
    this.name = 'CommitNotSent';
  }
}

/** Whether pg refused to send a statement (`e`) because its connection was already lost or closed. */
export function notSent(e: unknown): boolean {
  const message = (e as { message?: unknown } | null)?.message;
  return typeof message === 'string' && NOT_QUERYABLE.test(message);
}

/** pg's own bound on an answer passed (`queryTimeoutMs`): it failed the statement and dropped the connection. */
export function tooSlow(e: unknown): boolean {
  const message = (e as { message?: unknown } | null)?.message;
  return typeof message === 'string' && TOO_SLOW.test(message);
}

/** A connection-level failure of PostgreSQL: the server gone, refusing, or the path to it cut. */
export function connectionLost(e: unknown): boolean {
  if (e instanceof CommitNotSent) return true;
  if (fromServer(e)) return CONNECTION_TROUBLE.test(e.code);
  const { code, message, syscall, statusCode } = (e ?? {}) as Record<string, unknown>;
  // An HTTP request's failure carries its status (a client that hung up mid-body: ECONNRESET, 400).
  if (typeof statusCode === 'number') return false;
  // A socket's own failure names its system call (connect, read, write, getaddrinfo).
  if (typeof code === 'string' && SOCKET_CODES.has(code) && typeof syscall === 'string') return true;
  return typeof message === 'string' && PG_CONNECTION_MESSAGES.test(message);
}

/**
 * Why the database cannot serve now, in words for the caller, when `e` says so (else undefined):
 * the server unreachable or refusing connections, not answering in time, out of resources, or a
 * SQLite file locked by another process past the busy timeout. An AggregateError counts when any of its parts does.
 */
export function databaseUnavailable(e: unknown): string | undefined {
  if (e instanceof AggregateError) {
    for (const part of e.errors) {
      const reason = databaseUnavailable(part);
      if (reason !== undefined) return reason;
    }
    return undefined;
  }
  const message = (e as { message?: unknown } | null)?.message;
  if (typeof message === 'string' && POOL_BUSY.test(message)) return 'The database is busy.';
  if (tooSlow(e)) return 'The database did not answer in time.';
  if (connectionLost(e)) return 'The database cannot be reached.';
  if (fromServer(e)) {
    if (TOO_SLOW_CODES.has(e.code)) return 'The database did not answer in time.';
    return OUT_OF_RESOURCES.test(e.code) ? 'The database is out of resources.' : undefined;
  }
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && SQLITE_CODES.test(code))
    return code.startsWith('SQLITE_FULL') ? 'The database is out of room.' : 'The database is busy.';
  return undefined;
}
