import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { isPublicAddress } from '../core/index.js';
import { checkDnsSyntax } from './names.js';

/** Settings of one FILE check (DESIGN §5.6); the caller maps them from the configuration. */
export interface FileCheckOptions {
  /** Resolves a host name to its addresses (the caller passes the DCV resolver's A/AAAA lookup). */
  readonly resolve: (host: string) => Promise<string[]>;
  /** Where http:// URLs connect (CERTDESK_VALIDATION_HTTP_PORT, 80 in production). */
  readonly httpPort: number;
  /** Where https:// URLs connect (default 443). */
  readonly httpsPort?: number;
  /** Allow loopback, private and reserved addresses (CERTDESK_VALIDATION_ALLOW_PRIVATE, tests only). */
  readonly allowPrivate: boolean;
  /** Bound of the whole check, lookups and redirects included (default 10 000 ms). */
  readonly timeoutMs?: number;
  /** Redirects followed at most (default 3). */
  readonly maxRedirects?: number;
  /** Largest body accepted (default 65 536 bytes). */
  readonly maxBytes?: number;
}

/**
 * Outcome of a FILE check: `url` is where the matching content was found (after redirects). A
 * failure is a value; `transient` says whether trying again later may help (5xx, timeouts,
 * unreachable servers, failed lookups) or the customer has to change something first.
 */
export type FileCheckResult =
  | { readonly ok: true; readonly url: string }
  | { readonly ok: false; readonly problem: string; readonly transient: boolean };

const WELL_KNOWN = '/.well-known/pki-validation/';
const DEFAULTS = { httpsPort: 443, timeoutMs: 10_000, maxRedirects: 3, maxBytes: 65_536 };
/** The file name becomes a path segment: no slashes, dots-only names, escapes or query parts. */
const FILE_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}$/;
/** URLs and addresses in problems are the customer's input: keep them readable in logs. */
const MAX_SHOWN = 200;

/**
 * Fetches http://<host>/.well-known/pki-validation/<fileName> and compares the body with
 * `expected` (both trimmed, CRLF → LF). Every host, the first and each redirect target, is
 * resolved through `options.resolve` and the request goes to the resolved address itself, so a
 * DNS answer that changes between check and connect cannot reach a refused address. Never
 * throws; never for wildcard names or IP literals.
 */
export async function checkFile(
  host: string,
  fileName: string,
  expected: string,
  options: FileCheckOptions,
): Promise<FileCheckResult> {
  const raw = String(host).trim();
  if (raw.includes('*')) return refuse('FILE validation is not available for wildcard names');
  const name = checkDnsSyntax(raw, { allowWildcard: false });
  if (!name.ok) return refuse(`FILE validation needs a DNS name: ${name.problem}`);
  if (!FILE_NAME.test(fileName)) return refuse(`${shown(fileName)} is not a valid validation file name.`);
  const wanted = normalizeContent(expected);
  // An empty expectation would be met by any empty page.
  if (wanted === '') return refuse('The expected file content is empty.');

  const settings = {
    resolve: options.resolve,
    httpPort: options.httpPort,
    httpsPort: options.httpsPort ?? DEFAULTS.httpsPort,
    allowPrivate: options.allowPrivate,
    timeoutMs: options.timeoutMs ?? DEFAULTS.timeoutMs,
    maxRedirects: options.maxRedirects ?? DEFAULTS.maxRedirects,
    maxBytes: options.maxBytes ?? DEFAULTS.maxBytes,
  };
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), settings.timeoutMs);
  try {
    return await follow(new URL(`http://${name.name}${WELL_KNOWN}${fileName}`), wanted, settings, controller.signal);
  } catch (err) {
    // follow maps the expected failures; this is the net under anything unforeseen.
    if (controller.signal.aborted) return timedOut(settings.timeoutMs);
    return { ok: false, problem: `FILE check failed: ${describe(err)}`, transient: true };
  } finally {
    clearTimeout(timer);
    // Destroys whatever request may still be open.
    controller.abort();
  }
}

type Settings = Required<FileCheckOptions>;

async function follow(start: URL, wanted: string, s: Settings, signal: AbortSignal): Promise<FileCheckResult> {
  let url = start;
  const seen = new Set<string>();
  for (let redirects = 0; ; redirects++) {
    seen.add(url.href);
    const hostname = url.hostname;
    let addresses: string[];
    try {
      addresses = await untilAborted(
        Promise.resolve().then(() => s.resolve(hostname)),
        signal,
      );
    } catch (err) {
      if (signal.aborted) return timedOut(s.timeoutMs);
      return { ok: false, problem: `Could not resolve ${hostname}: ${describe(err)}`, transient: true };
    }
    const list = Array.isArray(addresses) ? addresses.filter((a) => typeof a === 'string') : [];
    const address = list.find((a) => isIP(a) !== 0 && (s.allowPrivate || isPublicAddress(a)));
    if (address === undefined) {
      if (list.length === 0) return refuse(`${hostname} has no address.`);
      return refuse(
        `${hostname} resolves only to addresses that may not be fetched (${shown(list.slice(0, 4).join(', '))}).`,
      );
    }

    const port = url.protocol === 'https:' ? s.httpsPort : s.httpPort;
    let hop: Hop;
    try {
      hop = await fetchOnce(url, address, port, s.maxBytes, signal);
    } catch (err) {
      if (signal.aborted) return timedOut(s.timeoutMs);
      return { ok: false, problem: `Could not fetch ${shown(url.href)}: ${describe(err)}`, transient: true };
    }

    if (hop.kind === 'too-large') return refuse(`response larger than ${sizeText(s.maxBytes)} at ${shown(url.href)}`);
    if (hop.kind === 'body') {
      if (normalizeContent(hop.body.toString('utf8')) === wanted) return { ok: true, url: url.href };
      // The body is not echoed: it is the customer's page, maybe large, maybe anything.
      return refuse(`content does not match at ${shown(url.href)}`);
    }
    if (hop.status >= 300 && hop.status < 400 && hop.location !== undefined) {
      if (redirects >= s.maxRedirects)
        return refuse(`too many redirects (more than ${s.maxRedirects}) at ${shown(url.href)}`);
      const next = redirectTarget(url, hop.location, s);
      if (!(next instanceof URL)) return next;
      // Nothing here carries state (no cookies), so a URL seen before means a loop.
      if (seen.has(next.href)) return refuse(`redirect loop at ${shown(next.href)}`);
      url = next;
      continue;
    }
    // 408 and 429 say "later" as plainly as a 5xx does.
    const transient = hop.status >= 500 || hop.status === 408 || hop.status === 429;
    return { ok: false, problem: `${shown(url.href)} returned HTTP ${hop.status}`, transient };
  }
}

/** The next URL of a redirect, or why it is not followed (only http(s) on the validation ports). */
function redirectTarget(from: URL, location: string, s: Settings): URL | FileCheckResult {
  let next: URL;
  try {
    next = new URL(location, from);
  } catch {
    return refuse(`redirect to an invalid location ${shown(JSON.stringify(location))}`);
  }
  if (next.protocol !== 'http:' && next.protocol !== 'https:') {
    return refuse(`redirect to ${shown(next.protocol)} is not allowed (only http and https)`);
  }
  // WHATWG URL drops a port equal to the scheme's default; the validation port applies then.
  const validationPort = next.protocol === 'https:' ? s.httpsPort : s.httpPort;
  if (next.port !== '' && Number(next.port) !== validationPort) {
    return refuse(
      `redirect to port ${next.port} is not allowed (only ${validationPort} for ${next.protocol.slice(0, -1)})`,
    );
  }
  const target = checkDnsSyntax(next.hostname, { allowWildcard: false });
  if (!target.ok) return refuse(`redirect to ${shown(next.host)} is not followed: ${target.problem}`);
  next.hash = '';
  // Credentials in a Location are never sent.
  next.username = '';
  next.password = '';
  return next;
}

type Hop =
  | { readonly kind: 'body'; readonly body: Buffer }
  | { readonly kind: 'status'; readonly status: number; readonly location: string | undefined }
  | { readonly kind: 'too-large' };

/** One GET to `address`:`port` for `url`; rejects on connection errors, timeouts and aborts. */
function fetchOnce(url: URL, address: string, port: number, maxBytes: number, signal: AbortSignal): Promise<Hop> {
  const family = isIP(address);
  // The host is already an address, so Node does not look it up; should it ever, it gets the same one.
  const lookup: LookupFunction = (_hostname, opts, callback) => {
    if (opts.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  };
  const common = {
    host: address,
    port,
    path: `${url.pathname}${url.search}`,
    method: 'GET',
    // url.host keeps an explicit non-default port, as the Host header should.
    headers: { host: url.host, 'user-agent': 'certdesk-dcv', accept: '*/*' },
    lookup,
    signal,
    // No pooling: one connection per hop, closed when done.
    agent: false,
  } as const;
  return new Promise<Hop>((resolve, reject) => {
    const onResponse = (res: http.IncomingMessage): void => {
      const status = res.statusCode ?? 0;
      if (status < 200 || status >= 300) {
        const location = res.headers.location;
        resolve({ kind: 'status', status, location });
        req.destroy();
        return;
      }
      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > maxBytes) {
        resolve({ kind: 'too-large' });
        req.destroy();
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > maxBytes) {
          resolve({ kind: 'too-large' });
          req.destroy();
          return;
        }
        chunks.push(chunk);
      });
      res.on('end', () => resolve({ kind: 'body', body: Buffer.concat(chunks) }));
      res.on('error', reject);
    };
    const req =
      url.protocol === 'https:'
        ? // The Baseline Requirements (3.2.2.4.18) allow the CA to fetch over https without
          // validating the server's certificate: what is proven is control of the content.
          https.request({ ...common, servername: url.hostname, rejectUnauthorized: false }, onResponse)
        : http.request(common, onResponse);
    req.on('error', reject);
    req.end();
  });
}

function normalizeContent(text: string): string {
  return String(text).replace(/\r\n/g, '\n').trim();
}

/** Resolves or rejects as `promise` does, or rejects once `signal` aborts (the lookup itself cannot be cancelled). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) return reject(new Error('aborted'));
    const onAbort = (): void => reject(new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

function sizeText(bytes: number): string {
  return bytes % 1024 === 0 ? `${bytes / 1024} KiB` : `${bytes} bytes`;
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    return code && !err.message.includes(code) ? `${code}: ${err.message}` : err.message;
  }
  return String(err);
}

function shown(text: string): string {
  return text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN)}…` : text;
}

function timedOut(ms: number): FileCheckResult {
  return { ok: false, problem: `FILE check timed out after ${ms} ms`, transient: true };
}

function refuse(problem: string): FileCheckResult {
  return { ok: false, problem, transient: false };
}
