import { createSocket } from 'node:dgram';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

// Loopback ports that refuse what is sent to them, held for as long as a test needs them. A port
// listened on (or bound) and closed again is free for the next server that starts: another
// test's server could be handed it and answer (seen in CI: a hash store that was "down", and a
// DNS server that was "closed", both answered). These ports stay taken, and nothing answers.

export interface RefusedPort {
  readonly port: number;
  close(): Promise<void>;
}

/**
 * A TCP port that refuses connections: the local port of a connection this process holds to a
 * server of its own. Nothing listens on it, and no server can while the connection lives.
 */
export async function refusedTcpPort(): Promise<RefusedPort> {
  let accepted: Socket | undefined;
  const holder = createServer((s) => {
    accepted = s;
    s.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  const held = connect((holder.address() as AddressInfo).port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => held.once('connect', resolve).once('error', reject));
  held.on('error', () => undefined);
  return {
    port: held.localPort!,
    close: async () => {
      held.destroy();
      accepted?.destroy();
      await new Promise<void>((resolve) => holder.close(() => resolve()));
    },
  };
}

/**
 * A UDP port that refuses datagrams (the kernel answers port unreachable): a socket bound to it
 * and connected to a socket of its own takes datagrams from that peer only, and keeps the port.
 */
export async function refusedUdpPort(): Promise<RefusedPort> {
  const peer = createSocket('udp4');
  await new Promise<void>((resolve) => peer.bind(0, '127.0.0.1', resolve));
  const held = createSocket('udp4');
  await new Promise<void>((resolve) => held.bind(0, '127.0.0.1', resolve));
  await new Promise<void>((resolve) => held.connect(peer.address().port, '127.0.0.1', resolve));
  return {
    port: held.address().port,
    close: async () => {
      await new Promise<void>((resolve) => held.close(resolve));
      await new Promise<void>((resolve) => peer.close(resolve));
    },
  };
}
