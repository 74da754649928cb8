// A TCP relay to PostgreSQL (`tcp-relay.ts`) that loses a chosen COMMIT: after the server
// answered it (the transaction was kept, the client never hears so), or before it reached the
// server (the client's end closed, the server's left open and waiting in the transaction); or
// that holds it: the path goes silent there and no end is closed (a NAT or load balancer that
// forgot the flow), so the client hears nothing, not even that the connection is gone.
import { startTcpRelay, type RelayedConnection, type TcpRelay } from './tcp-relay.js';

export interface CommitLoss {
  /**
   * `answerLost`: the COMMIT goes to the server, and the connection is cut once the server has
   * answered it. `neverSent`: it is dropped, and the client's end closed. `answerHeld`, `held`: as
   * those, but the connection goes silent instead of closing (blackholed, both ends left open).
   */
  readonly how: 'answerLost' | 'neverSent' | 'answerHeld' | 'held';
  /** Which COMMIT: the first for which this holds of what its connection sent since its last COMMIT (default: the next). */
  readonly when?: (sent: string) => boolean;
  /** From the loss on, the server is gone for the client: every connection closed, new ones refused (until `refuseNew` is reset). */
  readonly thenUnreachable?: boolean;
}

export interface CommitLossRelay extends TcpRelay {
  /** Arms one loss (replacing one armed before and not yet happened); undefined disarms. */
  lose(loss: CommitLoss | undefined): void;
  /** How many COMMITs were lost since `lose` was last called: 0 or 1. */
  readonly lost: number;
}

/** Kysely's COMMIT: a simple query message (Q, its length, the text) of its own. */
const COMMIT = /Q[\s\S]{4}commit\0/i;

export async function startCommitLossRelay(target: URL): Promise<CommitLossRelay> {
  let armed: CommitLoss | undefined;
  let lost = 0;
  /** What each connection sent since its last COMMIT. */
  const sent = new Map<RelayedConnection, string>();
  /** Connections whose COMMIT's answer is being waited for, to be dropped: what the server said since. */
  const losing = new Map<RelayedConnection, { heard: string; loss: CommitLoss }>();
  const gone = (loss: CommitLoss) => {
    if (loss.thenUnreachable !== true) return;
    relay.refuseNew = true;
    relay.closeAll();
  };
  const tcp = await startTcpRelay(
    target,
    5432,
    (chunk, connection) => {
      if (armed === undefined) return chunk;
      const text = (sent.get(connection) ?? '') + chunk.toString('latin1');
      if (!COMMIT.test(text)) {
        sent.set(connection, text);
        return chunk;
      }
      sent.delete(connection);
      const loss = armed;
      if (loss.when !== undefined && !loss.when(text)) return chunk;
      armed = undefined;
      lost++;
      if (loss.how === 'neverSent') {
        gone(loss);
        return 'vanish';
      }
      if (loss.how === 'held') {
        connection.blackholed = true;
        gone(loss);
        return Buffer.alloc(0);
      }
      losing.set(connection, { heard: '', loss });
      return chunk;
    },
    (chunk, connection) => {
      const waiting = losing.get(connection);
      if (waiting === undefined) return chunk;
      // Nothing the server says after the COMMIT reaches the client; once it has answered COMMIT, cut.
      waiting.heard += chunk.toString('latin1');
      if (!waiting.heard.includes('COMMIT\0')) return 'drop';
      losing.delete(connection);
      gone(waiting.loss);
      if (waiting.loss.how !== 'answerHeld') return 'cut';
      connection.blackholed = true;
      return 'drop';
    },
  );
  // The relay itself, not a copy: its refuseNew is read by its server.
  const relay = Object.defineProperties(tcp, {
    lose: {
      value: (loss: CommitLoss | undefined) => {
        armed = loss;
        lost = 0;
        sent.clear();
      },
    },
    lost: { get: () => lost },
  }) as CommitLossRelay;
  return relay;
}
