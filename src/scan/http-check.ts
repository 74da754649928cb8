// The HTTP front door: does http:// send visitors to https://, and what security headers (HSTS
// first) does the HTTPS site answer with. Every request goes to the pinned, already vetted address.
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { HttpResult } from './types.js';

/** The headers a current scanner checks (securityheaders.com's list), lower-cased. */
export const SECURITY_HEADERS = [
  'strict-transport-security',
  'content-security-policy',
  'x-frame-options',
  'x-content-type-options',
  'referrer-policy',
  'permissions-policy',
] as const;

export interface HttpCheckOptions {
  readonly name: string;
  readonly address: string;
  readonly httpPort: number;
  readonly httpsPort: number;
  readonly timeoutMs: number;
  readonly signal: AbortSignal;
}

/** Both checks at once. Never throws: what cannot be fetched is null (redirect) or absent (headers). */
export async function checkHttp(o: HttpCheckOptions): Promise<HttpResult> {
  const [plain, secure] = await Promise.all([
    head(o, http, o.httpPort, {}).catch(() => undefined),
    head(o, https, o.httpsPort, { rejectUnauthorized: false, servername: o.name }).catch(() => undefined),
  ]);
  const headers: Record<string, string | null> = {};
  for (const h of SECURITY_HEADERS) headers[h] = headerText(secure?.headers[h]);
  return {
    redirectsToHttps: plain === undefined ? null : redirectsToHttps(plain, o.name),
    hsts: parseHsts(headers['strict-transport-security'] ?? null),
    headers,
  };
}

/** RFC 6797 §6.1: `max-age` is required; the directives are case-insensitive. Null: absent or without max-age. */
export function parseHsts(value: string | null): HttpResult['hsts'] {
  if (value === null) return null;
  const directives = value.split(';').map((d) => d.trim().toLowerCase());
  const maxAge = directives.map((d) => /^max-age\s*=\s*"?(\d+)"?$/.exec(d)?.[1]).find((v) => v !== undefined);
  if (maxAge === undefined) return null;
  return {
    maxAge: Number(maxAge),
    includeSubDomains: directives.includes('includesubdomains'),
    preload: directives.includes('preload'),
  };
}

function redirectsToHttps(res: IncomingMessage, name: string): boolean {
  const status = res.statusCode ?? 0;
  if (![301, 302, 303, 307, 308].includes(status) || res.headers.location === undefined) return false;
  try {
    const to = new URL(res.headers.location, `http://${name}/`);
    return to.protocol === 'https:' && to.hostname.toLowerCase() === name.toLowerCase();
  } catch {
    return false;
  }
}

function headerText(value: string | string[] | undefined): string | null {
  if (value === undefined) return null;
  return Array.isArray(value) ? value.join(', ') : value;
}

/** GET / and keep only the status and headers. */
function head(
  o: HttpCheckOptions,
  module: typeof http | typeof https,
  port: number,
  tls: { rejectUnauthorized?: boolean; servername?: string },
): Promise<IncomingMessage> {
  const defaultPort = module === https ? 443 : 80;
  return new Promise((resolve, reject) => {
    const req = module.request(
      {
        host: o.address,
        port,
        path: '/',
        method: 'GET',
        headers: { host: port === defaultPort ? o.name : `${o.name}:${port}`, 'user-agent': 'certdesk-scan' },
        signal: o.signal,
        agent: false,
        ...tls,
      },
      (res) => {
        clearTimeout(timer);
        resolve(res);
        res.destroy();
      },
    );
    // Our own timer: the socket timeout of an https request restarts once TCP connects, so a
    // server that accepts and stays silent would hold it twice as long.
    const timer = setTimeout(() => req.destroy(new Error('timed out')), o.timeoutMs);
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.end();
  });
}

/**
 * Fetches a CA certificate from an AIA caIssuers URL (http only, at most 64 KiB, DER or PEM), the
 * host resolved and vetted by `resolve` like the scanned name. Undefined on any failure.
 */
export function fetchCaCertificate(
  url: string,
  resolve: (host: string) => Promise<string | undefined>,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<Buffer | undefined> {
  return (async () => {
    const target = new URL(url);
    if (target.protocol !== 'http:') return undefined;
    const host = target.hostname.replace(/^\[|\]$/g, '');
    const address = await resolve(host);
    if (address === undefined) return undefined;
    return new Promise<Buffer | undefined>((done) => {
      const req = http.get(
        {
          host: address,
          port: Number(target.port || 80),
          path: `${target.pathname}${target.search}`,
          headers: { host: target.host },
          timeout: timeoutMs,
          signal,
          agent: false,
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size > 65_536) req.destroy();
            else chunks.push(c);
          });
          res.on('end', () => done(res.statusCode === 200 ? Buffer.concat(chunks) : undefined));
          res.on('error', () => done(undefined));
        },
      );
      req.on('timeout', () => req.destroy());
      req.on('error', () => done(undefined));
    });
  })().catch(() => undefined);
}
