import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { refusedTcpPort } from '../../test/support/refused-ports.js';
import { checkFile, type FileCheckOptions, type FileCheckResult } from './file-check.js';

// Real node:http(s) servers on 127.0.0.1; names map to it through a tiny in-test resolver.
const FILE = 'B8E3A1C0D2F4.txt';
const PATH = `/.well-known/pki-validation/${FILE}`;
const TOKEN = 'a1b2c3d4e5f60718293a4b5c6d7e8f90\nsectigo.com\nt0k3n';
const NAMES: Record<string, string[]> = {
  'www.example.com': ['127.0.0.1'],
  'other.example.net': ['127.0.0.1'],
  'mixed.example.com': ['10.0.0.1', '127.0.0.1'],
  'nothing.example.com': [],
};
const resolve = async (name: string): Promise<string[]> => NAMES[name] ?? [];

interface Seen {
  readonly url: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly servername: string | undefined;
}
interface TestServer {
  readonly port: number;
  readonly requests: Seen[];
  readonly server: http.Server;
}
type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

const open: http.Server[] = [];

async function listen(server: http.Server, handler: Handler): Promise<TestServer> {
  const requests: Seen[] = [];
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    requests.push({
      url: req.url ?? '',
      headers: req.headers,
      servername: (req.socket as Partial<TLSSocket>).servername || undefined,
    });
    handler(req, res);
  });
  open.push(server);
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return { port: (server.address() as AddressInfo).port, requests, server };
}
const httpServer = (handler: Handler): Promise<TestServer> => listen(http.createServer(), handler);

const send =
  (status: number, body = '', headers: http.OutgoingHttpHeaders = {}): Handler =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': 'text/plain', ...headers });
    res.end(body);
  };
const redirect = (location: string, status = 302): Handler => send(status, '', { location });

const options = (port: number, extra: Partial<FileCheckOptions> = {}): FileCheckOptions => ({
  resolve,
  httpPort: port,
  allowPrivate: true,
  timeoutMs: 5_000,
  ...extra,
});

function expectFailure(result: FileCheckResult, problem: RegExp, transient: boolean): void {
  expect(result.ok).toBe(false);
  if (!result.ok) {
    expect(result.problem).toMatch(problem);
    expect(result.transient).toBe(transient);
  }
}

afterEach(async () => {
  const servers = open.splice(0);
  await Promise.all(
    servers.map(
      (server) =>
        new Promise<void>((done) => {
          server.closeAllConnections();
          server.close(() => done());
        }),
    ),
  );
});

describe('checkFile', () => {
  it('ok/exact-body: finds the file, asks for the right path with the name as Host', async () => {
    const s = await httpServer(send(200, TOKEN));
    const result = await checkFile('www.example.com', FILE, TOKEN, options(s.port));
    expect(result).toEqual({ ok: true, url: `http://www.example.com${PATH}` });
    expect(s.requests).toHaveLength(1);
    const [seen] = s.requests;
    expect(seen?.url).toBe(PATH);
    expect(seen?.headers.host).toBe('www.example.com');
    expect(seen?.headers['user-agent']).toBe('certdesk-dcv');
    expect(seen?.headers.accept).toBe('*/*');
    expect(seen?.headers.cookie).toBeUndefined();
    expect(seen?.headers.authorization).toBeUndefined();
  });

  it('ok/crlf-and-trailing-space: compares after CRLF → LF and trimming, on both sides', async () => {
    const s = await httpServer(send(200, `\r\n  ${TOKEN.replace(/\n/g, '\r\n')}\r\n  \n`));
    expect(await checkFile('www.example.com', FILE, `${TOKEN}\n`, options(s.port))).toMatchObject({ ok: true });
    expect(await checkFile('WWW.Example.COM.', FILE, TOKEN.replace(/\n/g, '\r\n'), options(s.port))).toMatchObject({
      ok: true,
    });
  });

  it('fail/wrong-content: says so without echoing the body', async () => {
    const s = await httpServer(send(200, 'secret page content'));
    const result = await checkFile('www.example.com', FILE, TOKEN, options(s.port));
    expectFailure(result, /content does not match/, false);
    if (!result.ok) expect(result.problem).not.toContain('secret');
  });

  it('fail/404: not transient, status named', async () => {
    const s = await httpServer(send(404, 'not here'));
    expectFailure(await checkFile('www.example.com', FILE, TOKEN, options(s.port)), /HTTP 404/, false);
  });

  it('fail/403: not transient, status named', async () => {
    const s = await httpServer(send(403));
    expectFailure(await checkFile('www.example.com', FILE, TOKEN, options(s.port)), /HTTP 403/, false);
  });

  it('fail/500: transient', async () => {
    const s = await httpServer(send(500, 'oops'));
    expectFailure(await checkFile('www.example.com', FILE, TOKEN, options(s.port)), /HTTP 500/, true);
  });

  it('fail/3xx-without-location: not followed, status named', async () => {
    const s = await httpServer(send(302));
    expectFailure(await checkFile('www.example.com', FILE, TOKEN, options(s.port)), /HTTP 302/, false);
  });

  it('ok/redirect-relative: follows a relative Location on the same host', async () => {
    const s = await httpServer((req, res) =>
      req.url === PATH ? redirect('../../moved/token.txt', 301)(req, res) : send(200, TOKEN)(req, res),
    );
    const result = await checkFile('www.example.com', FILE, TOKEN, options(s.port));
    expect(result).toEqual({ ok: true, url: 'http://www.example.com/moved/token.txt' });
    expect(s.requests.map((r) => r.url)).toEqual([PATH, '/moved/token.txt']);
    expect(s.requests[1]?.headers.host).toBe('www.example.com');
  });

  it('ok/redirect-absolute-other-host: follows to another name on the validation port, Host says that name', async () => {
    let port = 0;
    const s = await httpServer((req, res) => {
      if (req.headers.host === 'www.example.com')
        redirect(`http://other.example.net:${port}/dcv/${FILE}?x=1#frag`, 307)(req, res);
      else send(200, TOKEN)(req, res);
    });
    port = s.port;
    const result = await checkFile('www.example.com', FILE, TOKEN, options(s.port));
    expect(result).toEqual({ ok: true, url: `http://other.example.net:${port}/dcv/${FILE}?x=1` });
    expect(s.requests[1]?.url).toBe(`/dcv/${FILE}?x=1`);
    expect(s.requests[1]?.headers.host).toBe(`other.example.net:${port}`);
  });

  it('ok/three-redirects: the limit itself is allowed', async () => {
    const s = await httpServer((req, res) => {
      const hop = { [PATH]: '/hop1', '/hop1': '/hop2', '/hop2': '/hop3' }[req.url ?? ''];
      if (hop) redirect(hop)(req, res);
      else send(200, TOKEN)(req, res);
    });
    expect(await checkFile('www.example.com', FILE, TOKEN, options(s.port))).toMatchObject({ ok: true });
    expect(s.requests).toHaveLength(4);
  });

  it('fail/four-redirects: too many', async () => {
    const s = await httpServer((req, res) => {
      const hop = { [PATH]: '/hop1', '/hop1': '/hop2', '/hop2': '/hop3', '/hop3': '/hop4' }[req.url ?? ''];
      if (hop) redirect(hop)(req, res);
      else send(200, TOKEN)(req, res);
    });
    expectFailure(await checkFile('www.example.com', FILE, TOKEN, options(s.port)), /too many redirects/, false);
    expect(s.requests.map((r) => r.url)).not.toContain('/hop4');
  });

  it('fail/redirect-other-port: refused, the other server is never asked', async () => {
    const other = await httpServer(send(200, TOKEN));
    const s = await httpServer(redirect(`http://www.example.com:${other.port}${PATH}`));
    expectFailure(
      await checkFile('www.example.com', FILE, TOKEN, options(s.port)),
      new RegExp(`port ${other.port} is not allowed`),
      false,
    );
    expect(other.requests).toHaveLength(0);
  });

  it('fail/redirect-https-other-port: an https target must use the https validation port', async () => {
    const s = await httpServer(redirect(`https://www.example.com:1${PATH}`));
    expectFailure(
      await checkFile('www.example.com', FILE, TOKEN, options(s.port, { httpsPort: 8443 })),
      /port 1 is not allowed/,
      false,
    );
  });

  it('fail/redirect-ftp: only http and https', async () => {
    const s = await httpServer(redirect(`ftp://www.example.com${PATH}`));
    expectFailure(await checkFile('www.example.com', FILE, TOKEN, options(s.port)), /ftp: is not allowed/, false);
  });

  it('fail/redirect-ip-literal: a redirect target must be a DNS name too', async () => {
    let port = 0;
    const s = await httpServer((req, res) =>
      req.url === PATH ? redirect(`http://127.0.0.1:${port}/x`)(req, res) : send(200, TOKEN)(req, res),
    );
    port = s.port;
    expectFailure(await checkFile('www.example.com', FILE, TOKEN, options(s.port)), /IP address/, false);
    expect(s.requests).toHaveLength(1);
  });

  it('fail/redirect-loop: detected', async () => {
    const s = await httpServer((req, res) => redirect(req.url === PATH ? '/a' : PATH)(req, res));
    expectFailure(await checkFile('www.example.com', FILE, TOKEN, options(s.port)), /redirect loop/, false);
    expect(s.requests.map((r) => r.url)).toEqual([PATH, '/a']);
  });

  it('fail/body-over-64-KiB: refused and the connection closed', async () => {
    let closed!: Promise<void>;
    const s = await httpServer((_req, res) => {
      closed = new Promise<void>((done) => res.on('close', () => done()));
      res.writeHead(200, { 'content-type': 'text/plain' });
      // No Content-Length: the client has to count. Keeps writing until the client hangs up.
      const chunk = Buffer.alloc(16 * 1024, 'a');
      let sent = 0;
      const pump = (): void => {
        if (res.destroyed || sent > 16 * 1024 * 1024) return void res.end();
        sent += chunk.length;
        if (res.write(chunk)) setImmediate(pump);
        else res.once('drain', pump);
      };
      pump();
    });
    expectFailure(
      await checkFile('www.example.com', FILE, TOKEN, options(s.port)),
      /response larger than 64 KiB/,
      false,
    );
    await expect(closed).resolves.toBeUndefined();
  });

  it('fail/declared-length-over-limit: refused from the header alone', async () => {
    const s = await httpServer(send(200, 'x'.repeat(65_537)));
    expectFailure(
      await checkFile('www.example.com', FILE, TOKEN, options(s.port)),
      /response larger than 64 KiB/,
      false,
    );
  });

  it('ok/body-exactly-64-KiB: the limit itself is allowed', async () => {
    const body = `${TOKEN}${' '.repeat(65_536 - TOKEN.length)}`;
    const s = await httpServer(send(200, body));
    expect(await checkFile('www.example.com', FILE, TOKEN, options(s.port))).toMatchObject({ ok: true });
  });

  it('fail/slow-server: timeout is transient and the connection is closed', async () => {
    let closed!: Promise<void>;
    const s = await httpServer((req) => {
      closed = new Promise<void>((done) => req.socket.on('close', () => done()));
    });
    const started = Date.now();
    expectFailure(
      await checkFile('www.example.com', FILE, TOKEN, options(s.port, { timeoutMs: 300 })),
      /timed out/,
      true,
    );
    expect(Date.now() - started).toBeLessThan(3_000);
    await expect(closed).resolves.toBeUndefined();
  });

  it('fail/slow-resolver: the lookup counts against the timeout', async () => {
    const never = (): Promise<string[]> => new Promise<string[]>(() => undefined);
    expectFailure(
      await checkFile('www.example.com', FILE, TOKEN, options(1, { resolve: never, timeoutMs: 200 })),
      /timed out/,
      true,
    );
  });

  it('fail/connection-refused: transient', async () => {
    const refused = await refusedTcpPort();
    try {
      expectFailure(await checkFile('www.example.com', FILE, TOKEN, options(refused.port)), /ECONNREFUSED/, true);
    } finally {
      await refused.close();
    }
  });

  it('fail/wildcard: never for wildcard names', async () => {
    const s = await httpServer(send(200, TOKEN));
    expect(await checkFile('*.example.com', FILE, TOKEN, options(s.port))).toEqual({
      ok: false,
      problem: 'FILE validation is not available for wildcard names',
      transient: false,
    });
    expect(s.requests).toHaveLength(0);
  });

  it.each([['127.0.0.1'], ['[::1]'], ['::1']])('fail/ip-literal %s: refused', async (host) => {
    const s = await httpServer(send(200, TOKEN));
    expectFailure(await checkFile(host, FILE, TOKEN, options(s.port)), /IP address/, false);
    expect(s.requests).toHaveLength(0);
  });

  it.each([['../etc/passwd'], ['a/b.txt'], ['..'], ['x.txt?y=1'], ['x%2f.txt'], ['']])(
    'fail/file-name %j: refused',
    async (name) => {
      const s = await httpServer(send(200, TOKEN));
      expectFailure(await checkFile('www.example.com', name, TOKEN, options(s.port)), /file name/, false);
      expect(s.requests).toHaveLength(0);
    },
  );

  it('fail/empty-expected: an empty page never validates', async () => {
    const s = await httpServer(send(200, ''));
    expectFailure(await checkFile('www.example.com', FILE, ' \r\n ', options(s.port)), /empty/, false);
    expect(s.requests).toHaveLength(0);
  });

  it('fail/private-address: refused without allowPrivate, the server is never asked', async () => {
    const s = await httpServer(send(200, TOKEN));
    const result = await checkFile('www.example.com', FILE, TOKEN, options(s.port, { allowPrivate: false }));
    expectFailure(result, /127\.0\.0\.1/, false);
    expect(s.requests).toHaveLength(0);
  });

  it('fail/only-private-addresses: [10.0.0.1, 127.0.0.1] is refused without allowPrivate', async () => {
    const s = await httpServer(send(200, TOKEN));
    expectFailure(
      await checkFile('mixed.example.com', FILE, TOKEN, options(s.port, { allowPrivate: false })),
      /may not be fetched/,
      false,
    );
    expect(s.requests).toHaveLength(0);
  });

  it('ok/each-hop-resolved: every redirect target goes through the resolver again', async () => {
    let port = 0;
    const s = await httpServer((req, res) => {
      if (req.headers.host === 'www.example.com') redirect(`http://other.example.net:${port}${PATH}`)(req, res);
      else send(200, TOKEN)(req, res);
    });
    port = s.port;
    const asked: string[] = [];
    const recording = async (name: string): Promise<string[]> => {
      asked.push(name);
      return resolve(name);
    };
    expect(await checkFile('www.example.com', FILE, TOKEN, options(s.port, { resolve: recording }))).toMatchObject({
      ok: true,
    });
    expect(asked).toEqual(['www.example.com', 'other.example.net']);
  });

  it('fail/no-address: not transient', async () => {
    expectFailure(await checkFile('nothing.example.com', FILE, TOKEN, options(1)), /no address/, false);
  });

  it('fail/resolver-throws: transient', async () => {
    const failing = async (): Promise<string[]> => {
      throw Object.assign(new Error('queryA ESERVFAIL www.example.com'), { code: 'ESERVFAIL' });
    };
    expectFailure(
      await checkFile('www.example.com', FILE, TOKEN, options(1, { resolve: failing })),
      /Could not resolve www\.example\.com/,
      true,
    );
  });

  describe('https', () => {
    let dir = '';
    let key = '';
    let cert = '';
    beforeAll(() => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'certdesk-file-check-'));
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:P-256',
          '-nodes',
          '-days',
          '2',
          '-subj',
          '/CN=localhost',
          '-keyout',
          'k.pem',
          '-out',
          'c.pem',
        ],
        { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      key = fs.readFileSync(path.join(dir, 'k.pem'), 'utf8');
      cert = fs.readFileSync(path.join(dir, 'c.pem'), 'utf8');
    });
    afterAll(() => {
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
    });

    it('ok/redirect-to-https: self-signed certificate accepted, SNI is the name', async () => {
      const secure = await listen(https.createServer({ key, cert }), send(200, TOKEN));
      const s = await httpServer(redirect(`https://www.example.com:${secure.port}${PATH}`));
      const result = await checkFile('www.example.com', FILE, TOKEN, options(s.port, { httpsPort: secure.port }));
      expect(result).toEqual({ ok: true, url: `https://www.example.com:${secure.port}${PATH}` });
      expect(secure.requests).toHaveLength(1);
      expect(secure.requests[0]?.servername).toBe('www.example.com');
      expect(secure.requests[0]?.headers.host).toBe(`www.example.com:${secure.port}`);
      expect(secure.requests[0]?.url).toBe(PATH);
    });

    it('fail/https-wrong-content: compared the same way', async () => {
      const secure = await listen(https.createServer({ key, cert }), send(200, 'nope'));
      const s = await httpServer(redirect(`https://www.example.com:${secure.port}${PATH}`));
      expectFailure(
        await checkFile('www.example.com', FILE, TOKEN, options(s.port, { httpsPort: secure.port })),
        /content does not match/,
        false,
      );
    });
  });
});
