// Loopback ports for the servers tests start on fixed ports (nginx, httpd, `certdesk serve`).
import { createServer, type Server } from 'node:net';

/**
 * `n` distinct loopback ports nothing listens on right now. They are held open together while
 * picked, so no two are alike (a port picked and released can come back from the next pick).
 * Another process may still take one before the caller binds it: callers that can, retry.
 */
export async function freePorts(n: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const server = createServer();
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, '127.0.0.1', resolve);
      });
    }
    return servers.map((s) => (s.address() as { port: number }).port);
  } finally {
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  }
}

/** One loopback port nothing listens on right now. */
export async function freePort(): Promise<number> {
  return (await freePorts(1))[0]!;
}
