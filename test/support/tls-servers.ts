// Real TLS servers for the scanner's tests: Debian's nginx on loopback ports with certificates from
// certdesk's own CA, one server { } per configuration (plus its http:// listener), and sslscan as
// the yardstick the scanner's findings are compared with.
import { execFile, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { readableTempDir, running, type RunningServer } from './web-servers.js';

/** One TLS site as nginx serves it. */
export interface TlsSiteSpec {
  readonly port: number;
  /** The http:// listener; it redirects to https:// when `redirect` is set, else answers 200. */
  readonly httpPort: number;
  readonly redirect: boolean;
  /** PEM of what the server sends: the leaf, then whatever intermediates it should send. */
  readonly chainPem: string;
  readonly keyPem: string;
  /** nginx `ssl_protocols`, e.g. `TLSv1.2 TLSv1.3`. */
  readonly protocols: string;
  /** nginx `ssl_ciphers` (TLS ≤ 1.2; TLS 1.3 keeps OpenSSL's default suites). */
  readonly ciphers: string;
  readonly preferServerCiphers: boolean;
  /** Strict-Transport-Security value, if any. */
  readonly hsts?: string;
  /** A DER OCSP response to staple (nginx `ssl_stapling_file`). */
  readonly ocspDer?: Uint8Array;
}

/** The binary of a tool the tests need, or why not: a missing one fails in CI (`CI` set) and is skipped elsewhere. */
export function requiredBinary(name: 'nginx' | 'sslscan'): string | undefined {
  const binary = ['/usr/sbin', '/usr/bin', '/sbin'].map((d) => join(d, name)).find((p) => existsSync(p));
  if (binary !== undefined) return binary;
  const reason = `TLS scanner tests not run: ${name} not found (apt-get install ${name})`;
  if (process.env.CI) throw new Error(reason);
  console.warn(reason);
  return undefined;
}

/** nginx with one TLS server { } and one plain server { } per site. */
export async function startTlsNginx(binary: string, sites: readonly TlsSiteSpec[]): Promise<RunningServer> {
  const dir = readableTempDir('certdesk-tls-nginx-');
  mkdirSync(join(dir, 'temp'));
  const servers = sites.map((site, i) => {
    writeFileSync(join(dir, `site-${i}.crt`), site.chainPem);
    writeFileSync(join(dir, `site-${i}.key`), site.keyPem, { mode: 0o600 });
    const stapling =
      site.ocspDer === undefined
        ? ''
        : (writeFileSync(join(dir, `site-${i}.ocsp`), site.ocspDer),
          `ssl_stapling on;\n    ssl_stapling_file ${dir}/site-${i}.ocsp;`);
    const hsts = site.hsts === undefined ? '' : `add_header Strict-Transport-Security "${site.hsts}" always;`;
    const plain = site.redirect ? `return 301 https://$host:${site.port}$request_uri;` : 'return 200 "plain\\n";';
    return `
  server {
    listen 127.0.0.1:${site.port} ssl;
    ssl_certificate ${dir}/site-${i}.crt;
    ssl_certificate_key ${dir}/site-${i}.key;
    ssl_protocols ${site.protocols};
    ssl_ciphers '${site.ciphers}';
    ssl_prefer_server_ciphers ${site.preferServerCiphers ? 'on' : 'off'};
    ${stapling}
    ${hsts}
    location / { return 200 "ok\\n"; }
  }
  server {
    listen 127.0.0.1:${site.httpPort};
    location / { ${plain} }
  }`;
  });
  writeFileSync(
    join(dir, 'nginx.conf'),
    `worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log notice;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${dir}/temp/body;
  proxy_temp_path ${dir}/temp/proxy;
  fastcgi_temp_path ${dir}/temp/fastcgi;
  uwsgi_temp_path ${dir}/temp/uwsgi;
  scgi_temp_path ${dir}/temp/scgi;
  default_type text/plain;
${servers.join('\n')}
}
`,
  );
  const child = spawn(binary, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-g', 'daemon off;'], { stdio: 'pipe' });
  return running(
    child,
    sites.flatMap((s) => [s.port, s.httpPort]),
    join(dir, 'error.log'),
  );
}

/** A TCP listener that accepts and never says a word (counting connections); close() ends it and every held connection. */
export async function startSilentServer(): Promise<{ port: number; connections(): number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server = createServer((socket) => {
    accepted++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address();
  return {
    port: typeof address === 'object' && address !== null ? address.port : 0,
    connections: () => accepted,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** A new key and CSR made by the openssl CLI for `names` (first is the CN). */
export function newKeyAndCsr(names: readonly string[], key = 'rsa:2048'): { keyPem: string; csrPem: string } {
  const dir = readableTempDir('certdesk-scan-csr-');
  const r = spawnSync(
    'openssl',
    [
      'req',
      '-new',
      '-newkey',
      key,
      '-nodes',
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'csr.pem'),
      '-subj',
      `/CN=${names[0]}`,
      '-addext',
      `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}`,
    ],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`openssl req failed: ${r.stderr}`);
  return { keyPem: readFileSync(join(dir, 'key.pem'), 'utf8'), csrPem: readFileSync(join(dir, 'csr.pem'), 'utf8') };
}

/** The DER OCSP request for `leafPem` issued by `issuerPem`, built by `openssl ocsp` as a relying party would. */
export function ocspRequest(leafPem: string, issuerPem: string): Buffer {
  const dir = readableTempDir('certdesk-scan-ocsp-');
  writeFileSync(join(dir, 'leaf.pem'), leafPem);
  writeFileSync(join(dir, 'issuer.pem'), issuerPem);
  const r = spawnSync(
    'openssl',
    [
      'ocsp',
      '-issuer',
      join(dir, 'issuer.pem'),
      '-cert',
      join(dir, 'leaf.pem'),
      '-reqout',
      join(dir, 'req.der'),
      '-no_nonce',
    ],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`openssl ocsp failed: ${r.stderr}`);
  return readFileSync(join(dir, 'req.der'));
}

/** What sslscan saw: offered versions and accepted suites (OpenSSL names) per version, and the preferred one. */
export interface SslscanResult {
  readonly protocols: Readonly<Record<string, boolean>>;
  readonly accepted: Readonly<Record<string, readonly string[]>>;
  readonly preferred: Readonly<Record<string, string>>;
  readonly output: string;
}

/** sslscan's versions as our TlsVersion names. */
const SSLSCAN_VERSIONS: Record<string, string> = {
  SSLv2: 'SSLv2',
  SSLv3: 'SSLv3',
  'TLSv1.0': 'TLSv1.0',
  'TLSv1.1': 'TLSv1.1',
  'TLSv1.2': 'TLSv1.2',
  'TLSv1.3': 'TLSv1.3',
};

/** Runs `sslscan --no-colour --sni-name=NAME 127.0.0.1:PORT` (asynchronously) and parses its text. */
export function runSslscan(binary: string, name: string, port: number): Promise<SslscanResult> {
  return new Promise((resolve, reject) => {
    execFile(
      binary,
      ['--no-colour', '--no-heartbleed', '--no-groups', `--sni-name=${name}`, `127.0.0.1:${port}`],
      { encoding: 'utf8', timeout: 60_000 },
      (err, stdout) => (err !== null && stdout === '' ? reject(err) : resolve(parseSslscan(stdout))),
    );
  });
}

export function parseSslscan(output: string): SslscanResult {
  const protocols: Record<string, boolean> = {};
  const accepted: Record<string, string[]> = {};
  const preferred: Record<string, string> = {};
  let inProtocols = false;
  for (const line of output.split('\n')) {
    if (/SSL\/TLS Protocols:/.test(line)) inProtocols = true;
    else if (inProtocols && line.trim() === '') inProtocols = false;
    else if (inProtocols) {
      const m = /^(\S+)\s+(enabled|disabled)/.exec(line.trim());
      if (m !== null && SSLSCAN_VERSIONS[m[1]!] !== undefined) protocols[SSLSCAN_VERSIONS[m[1]!]!] = m[2] === 'enabled';
    }
    // e.g. "Preferred TLSv1.3  128 bits  TLS_AES_128_GCM_SHA256  Curve 25519 DHE 253"
    const suite = /^(Preferred|Accepted)\s+(\S+)\s+\d+\s+bits\s+(\S+)/.exec(line.trim());
    if (suite !== null) {
      const [, kind, version = '', cipher = ''] = suite;
      (accepted[version] ??= []).push(cipher);
      if (kind === 'Preferred') preferred[version] = cipher;
    }
  }
  return { protocols, accepted, preferred, output };
}
