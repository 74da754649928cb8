// certdesk hash store middleware for Node: node:http, Express/Connect and Fastify. No dependencies.
//
// Serves the validation hash a customer filed in certdesk's hash store (spec 4.35) at
// /.well-known/pki-validation/fileauth.txt and /.well-known/<ca>/domain-validation/gstext.html
// when no file answers there. It fails safe: a store that is down, slow, silent or answering
// anything but a well-formed hash gives a plain 404, never an error page, a hang or stray bytes.
// Set-ups: docs/web-server-modules.md.
import { stat } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { clearTimeout, setTimeout } from 'node:timers';

/**
 * @typedef {object} CertdeskHashOptions
 * @property {string} storeUrl The hash store, `scheme://host[:port][/path]`; `/<host name>` is appended.
 * @property {string} key The customer's store key, sent as `x-api-key` to the store and nowhere else.
 * @property {string} [root] Document root: when a file exists at the requested path, the request is
 *   passed on (a file on disk wins). Leave it out when the middleware runs after the static files.
 * @property {number} [timeoutMs] Bound of one store request, connect to last byte (default 1000).
 */

/**
 * @typedef {{ headers: Record<string, string | string[] | undefined>, method?: string, url?: string,
 *   originalUrl?: string }} IncomingRequest
 * @typedef {{ headersSent: boolean, writeHead(status: number, headers: Record<string, string | number>): unknown,
 *   end(body?: string): unknown }} OutgoingResponse
 * @typedef {{ code(status: number): FastifyLikeReply, headers(h: Record<string, string | number>): FastifyLikeReply,
 *   send(body: string): FastifyLikeReply }} FastifyLikeReply
 * @typedef {{ (req: IncomingRequest, res: OutgoingResponse, next: (err?: unknown) => void): void,
 *   onRequest(request: { raw: IncomingRequest }, reply: FastifyLikeReply): Promise<FastifyLikeReply | undefined> }}
 *   CertdeskHashMiddleware
 */

/** The two validation paths of spec 4.35 (path only, without the query). */
const VALIDATION_PATH =
  /^\/\.well-known\/(?:pki-validation\/fileauth\.txt|[a-z0-9][a-z0-9-]{0,62}\/domain-validation\/gstext\.html)$/;
const LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
/** Two or more LDH labels, a TLD that is not all digits (so no IPv4 literal), at most 253 characters. */
const DNS_NAME = new RegExp(`^(?=.{1,253}$)(?:${LABEL}\\.)+(?=[a-z0-9-]*[a-z])${LABEL}$`);
const TEXT_PLAIN = /^text\/plain\s*(?:;|$)/i;
/** Largest store answer read; a hash is at most 512 printable ASCII characters. */
const MAX_BYTES = 4096;
const MAX_HASH = 512;
const HASH_LINE = /^[\x20-\x7e]*[\x21-\x7e][\x20-\x7e]*$/;
const notFound = () => ({ status: 404, body: 'Not Found\n' });

/**
 * Builds the middleware for one store key (one customer). Throws TypeError for a bad option.
 * @param {CertdeskHashOptions} options
 * @returns {CertdeskHashMiddleware}
 */
export function certdeskHash(options) {
  const settings = checkOptions(options);

  /**
   * What to answer, or undefined when the request is not ours (pass it on).
   * @param {IncomingRequest} req
   * @returns {Promise<{ status: number, body: string } | undefined>}
   */
  async function answer(req) {
    if (req.method !== 'GET' && req.method !== 'HEAD') return undefined;
    const path = (req.originalUrl ?? req.url ?? '').split('?')[0] ?? '';
    if (!VALIDATION_PATH.test(path)) return undefined;
    if (settings.root !== undefined && (await isFile(join(settings.root, path)))) return undefined;
    const host = hostName(req.headers.host);
    const hash = host === undefined ? undefined : await fetchHash(settings, host);
    return hash === undefined ? notFound() : { status: 200, body: `${hash}\n` };
  }

  /** @type {CertdeskHashMiddleware} */
  const middleware = (req, res, next) => {
    answer(req)
      .catch(notFound)
      .then((result) => (result === undefined ? next() : send(res, result)));
  };
  middleware.onRequest = async (request, reply) => {
    const result = await answer(request.raw).catch(notFound);
    if (result === undefined) return undefined;
    return reply.code(result.status).headers(headersFor(result.body)).send(result.body);
  };
  return middleware;
}

/**
 * The store's name for a Host header: lower-cased, port and one trailing dot dropped; undefined
 * unless it is a DNS name (so nothing but `[a-z0-9.-]` ever reaches the store URL).
 * @param {unknown} header
 * @returns {string | undefined}
 */
export function hostName(header) {
  if (typeof header !== 'string') return undefined;
  const name = /^([a-z0-9.-]+?)\.?(?::[0-9]{1,5})?$/.exec(header.trim().toLowerCase())?.[1];
  return name !== undefined && DNS_NAME.test(name) ? name : undefined;
}

/**
 * The hash in a store answer: a 2xx `text/plain` body of at most 4 KiB whose last line is
 * printable ASCII and not blank; undefined for anything else.
 * @param {number} status
 * @param {string | undefined} contentType
 * @param {string} body
 * @returns {string | undefined}
 */
export function hashOf(status, contentType, body) {
  if (status < 200 || status > 299 || !TEXT_PLAIN.test(contentType ?? '') || body.length > MAX_BYTES) return undefined;
  const last = (
    body
      .replace(/\r?\n$/, '')
      .split('\n')
      .at(-1) ?? ''
  ).replace(/\r$/, '');
  return last.length <= MAX_HASH && HASH_LINE.test(last) ? last : undefined;
}

/**
 * @param {CertdeskHashOptions} options
 * @returns {{ storeUrl: string, key: string, root: string | undefined, timeoutMs: number }}
 */
function checkOptions(options) {
  const { storeUrl, key, root, timeoutMs = 1000 } = options ?? {};
  let url;
  try {
    url = new URL(String(storeUrl));
  } catch {
    throw new TypeError('certdeskHash: storeUrl must be an http(s) URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new TypeError('certdeskHash: storeUrl must be an http(s) URL');
  if (typeof key !== 'string' || !/^[\x21-\x7e]+$/.test(key))
    throw new TypeError('certdeskHash: key must be the store key (printable ASCII)');
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new TypeError('certdeskHash: timeoutMs must be positive');
  return { storeUrl: String(storeUrl).replace(/\/+$/, ''), key, root, timeoutMs };
}

/** @param {string} path */
async function isFile(path) {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

/**
 * `GET {storeUrl}/<host>` with the key; the hash, or undefined on any failure. Never rejects.
 * @param {{ storeUrl: string, key: string, timeoutMs: number }} settings
 * @param {string} host
 * @returns {Promise<string | undefined>}
 */
function fetchHash(settings, host) {
  return new Promise((resolve) => {
    /** @type {NodeJS.Timeout | undefined} */
    let timer;
    /** @type {import('node:http').ClientRequest | undefined} */
    let req;
    let settled = false;
    /** @param {string | undefined} hash */
    const finish = (hash) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req?.destroy();
      resolve(hash);
    };
    const url = `${settings.storeUrl}/${host}`;
    const send = url.startsWith('https:') ? httpsRequest : httpRequest;
    const headers = { 'x-api-key': settings.key, accept: 'text/plain' };
    // No pooling: a store that breaks a connection cannot leave one behind for the next request.
    req = send(url, { method: 'GET', headers, agent: false }, (res) => {
      const status = res.statusCode ?? 0;
      const type = res.headers['content-type'];
      if (status < 200 || status > 299 || Number(res.headers['content-length'] ?? 0) > MAX_BYTES)
        return finish(undefined);
      /** @type {Buffer[]} */
      const chunks = [];
      let size = 0;
      res.on('data', (/** @type {Buffer} */ chunk) => {
        size += chunk.length;
        if (size > MAX_BYTES) finish(undefined);
        else chunks.push(chunk);
      });
      res.on('end', () => finish(hashOf(status, type, Buffer.concat(chunks).toString('latin1'))));
      res.on('error', () => finish(undefined));
    });
    timer = setTimeout(() => finish(undefined), settings.timeoutMs);
    req.on('error', () => finish(undefined));
    req.end();
  });
}

/** @param {string} body */
function headersFor(body) {
  return {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  };
}

/**
 * @param {OutgoingResponse} res
 * @param {{ status: number, body: string }} result
 */
function send(res, result) {
  // Something earlier already answered: leave it be.
  if (res.headersSent) return;
  res.writeHead(result.status, headersFor(result.body));
  // Node leaves the body out of a HEAD response by itself.
  res.end(result.body);
}
