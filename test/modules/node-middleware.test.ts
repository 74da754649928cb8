// modules/certdesk-hash.mjs in the three forms its users write: a node:http server, an
// Express-style middleware chain, and a Fastify onRequest hook.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { join, normalize } from 'node:path';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { describeWebModule } from '../support/web-module-contract.js';
import { MODULES_DIR, type SiteSpec } from '../support/web-servers.js';

type Next = () => void;
interface Middleware {
  (req: IncomingMessage, res: ServerResponse, next: Next): void;
  onRequest(request: FastifyRequest, reply: FastifyReply): Promise<unknown>;
}
interface CertdeskHashModule {
  certdeskHash(options: { storeUrl: string; key: string; root?: string; timeoutMs?: number }): Middleware;
}

// Loaded as its users load it: plain JavaScript, no build step.
const { certdeskHash } = (await import(join(MODULES_DIR, 'certdesk-hash.mjs'))) as CertdeskHashModule;

/** The site's own handling: a file under the root, else the front controller (index.php-style). */
async function siteFile(root: string, url: string | undefined): Promise<string | undefined> {
  const path = normalize(decodeURIComponent((url ?? '/').split('?')[0]!));
  if (path.includes('..')) return undefined;
  const file = join(root, path);
  return (await stat(file).catch(() => undefined))?.isFile() ? file : undefined;
}
function site(root: string) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    void siteFile(root, req.url).then((file) => {
      if (file === undefined)
        return void res.writeHead(200, { 'content-type': 'text/plain' }).end('front controller\n');
      res.writeHead(200, { 'content-type': 'text/plain' });
      createReadStream(file).pipe(res);
    });
  };
}

/** A server per site from `serve(site)`; stop() closes them all. */
async function nodeServers(sites: readonly SiteSpec[], serve: (site: SiteSpec) => Server | Promise<Server>) {
  const servers = await Promise.all(sites.map(serve));
  // A taken port rejects (the caller picks new ports), never an uncaught error.
  try {
    await Promise.all(
      servers.map(
        (s, i) =>
          new Promise<void>((resolve, reject) => {
            s.once('error', reject);
            s.listen(sites[i]!.port, '127.0.0.1', () => {
              s.off('error', reject);
              resolve();
            });
          }),
      ),
    );
  } catch (e) {
    await Promise.all(servers.filter((s) => s.listening).map((s) => new Promise((r) => s.close(r))));
    throw e;
  }
  return {
    async stop() {
      for (const s of servers) s.closeAllConnections();
      await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
    },
  };
}

describeWebModule({
  name: 'node:http',
  servesHead: true,
  guardsWellKnown: false,
  start: (sites) =>
    nodeServers(sites, (s) => {
      const hash = certdeskHash({ storeUrl: s.storeUrl, key: s.key, root: s.root });
      const app = site(s.root);
      return createServer((req, res) => hash(req, res, () => app(req, res)));
    }),
});

describeWebModule({
  name: 'Express-style middleware chain',
  servesHead: true,
  guardsWellKnown: false,
  // app.use(express.static(root)); app.use(certdeskHash({ storeUrl, key })); app.use(frontController)
  start: (sites) =>
    nodeServers(sites, (s) => {
      const staticFiles = (req: IncomingMessage, res: ServerResponse, next: Next) =>
        void siteFile(s.root, req.url).then((file) => (file === undefined ? next() : site(s.root)(req, res)));
      const frontController = (_req: IncomingMessage, res: ServerResponse) =>
        void res.writeHead(200, { 'content-type': 'text/plain' }).end('front controller\n');
      const chain = [staticFiles, certdeskHash({ storeUrl: s.storeUrl, key: s.key }), frontController];
      return createServer((req, res) => {
        const run = (i: number): void => chain[i]!(req, res, () => run(i + 1));
        run(0);
      });
    }),
});

describeWebModule({
  name: 'Fastify onRequest hook',
  servesHead: true,
  guardsWellKnown: false,
  start: (sites) =>
    nodeServers(sites, async (s) => {
      const app = Fastify();
      app.addHook('onRequest', certdeskHash({ storeUrl: s.storeUrl, key: s.key, root: s.root }).onRequest);
      app.all('/*', async (request, reply) => {
        const file = await siteFile(s.root, request.url);
        return reply.type('text/plain').send(file === undefined ? 'front controller\n' : createReadStream(file));
      });
      await app.ready();
      return app.server;
    }),
});

describe('certdeskHash options', () => {
  it('fail/a store URL that is not http(s), or a missing or multi-line key, is refused at once', () => {
    const good = { storeUrl: 'http://127.0.0.1:8081', key: 'cdk_x' };
    expect(() => certdeskHash(good)).not.toThrow();
    for (const bad of [
      { ...good, storeUrl: 'file:///etc/passwd' },
      { ...good, storeUrl: 'kv.certdesk.example' },
      { ...good, key: '' },
      { ...good, key: 'cdk_x\r\nx-other: 1' },
      { ...good, timeoutMs: 0 },
    ])
      expect(() => certdeskHash(bad), JSON.stringify(bad)).toThrow(TypeError);
  });
});
