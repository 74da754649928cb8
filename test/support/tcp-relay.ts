// A TCP relay on loopback between a client under test and a real server (PostgreSQL, Redis), to
// lose connections the ways a network loses them: a path dropped without a word (no FIN, no RST:
// a NAT or a load balancer that forgot the flow), every connection closed and new ones refused,
// or one connection cut at a chosen moment (after the server answered, before the client heard).
import { createConnection, createServer, type Socket } from 'node:net';

/** One connection through the relay. `blackholed`: what either end sends is dropped, and nothing is closed. */
export interface RelayedConnection {
  readonly client: Socket;
  blackholed: boolean;
  open: boolean;
  /** How many chunks the client sent (about one per write it made). */
  chunks: number;
}

/**
 * What the relay does with a chunk the client sends: pass it on as it is, pass on another (a
 * spoiled statement), cut the connection, or `vanish`: the chunk is dropped and the client's end
 * closed, while the server's end stays open and hears nothing more (it learns of nothing).
 */
export type ClientChunk = (chunk: Buffer, connection: RelayedConnection) => Buffer | 'cut' | 'vanish';

/** What the relay does with a chunk the server sends: pass it on, drop it, or cut the connection. */
export type ServerChunk = (chunk: Buffer, connection: RelayedConnection) => Buffer | 'drop' | 'cut';

export interface TcpRelay {
  /** `127.0.0.1:<port>` of the relay, for a URL. */
  readonly host: string;
  readonly connections: RelayedConnection[];
  /** New connections are blackholed from their start while true. */
  blackholeNew: boolean;
  /** New connections are closed at once while true. */
  refuseNew: boolean;
  /** Every connection carried so far is blackholed; new ones pass (unless told otherwise). */
  forgetFlows(): void;
  /** Every connection carried so far is closed. */
  closeAll(): void;
  close(): Promise<void>;
}

/**
 * Starts a relay to `target` (a `host:port`, or a URL whose host and port are used, `defaultPort`
 * when it names none). `hungProxy`: a blackholed connection does not answer the client's close
 * either (as a proxy that hangs: the client's FIN is never answered with one).
 */
export async function startTcpRelay(
  target: URL,
  defaultPort: number,
  onClientChunk: ClientChunk = (chunk) => chunk,
  onServerChunk: ServerChunk = (chunk) => chunk,
  options: { hungProxy?: boolean } = {},
): Promise<TcpRelay> {
  const connections: RelayedConnection[] = [];
  const upstreams = new Set<Socket>();
  const server = createServer({ allowHalfOpen: options.hungProxy === true }, (client) => {
    if (relay.refuseNew) return void client.destroy();
    const upstream = createConnection(Number(target.port === '' ? defaultPort : target.port), target.hostname);
    upstreams.add(upstream);
    upstream.on('close', () => upstreams.delete(upstream));
    const connection: RelayedConnection = { client, blackholed: relay.blackholeNew, open: true, chunks: 0 };
    connections.push(connection);
    let vanished = false;
    const end = () => {
      connection.open = false;
      client.destroy();
      if (!vanished) upstream.destroy();
    };
    client.on('data', (chunk: Buffer) => {
      connection.chunks++;
      if (connection.blackholed) return;
      const passed = onClientChunk(chunk, connection);
      if (passed === 'cut') return end();
      if (passed === 'vanish') {
        vanished = true;
        connection.blackholed = true;
        return end();
      }
      upstream.write(passed);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (connection.blackholed) return;
      const passed = onServerChunk(chunk, connection);
      if (passed === 'cut') return end();
      if (passed !== 'drop') client.write(passed);
    });
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
    // Half-open sockets: a close passes on as before, but not through a hung (blackholed) path.
    if (options.hungProxy === true) client.on('end', () => void (connection.blackholed || end()));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const relay: TcpRelay = {
    host: `127.0.0.1:${(server.address() as { port: number }).port}`,
    connections,
    blackholeNew: false,
    refuseNew: false,
    forgetFlows: () => {
      for (const c of connections) c.blackholed = true;
    },
    closeAll: () => {
      for (const c of connections) c.client.destroy();
    },
    close: async () => {
      relay.closeAll();
      for (const u of upstreams) u.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return relay;
}
