import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { fastifyTrustProxy, type TrustProxy } from '../trust-proxy.js';
import rateLimit from '@fastify/rate-limit';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { CertdeskError, errorRow, type ErrorKind } from '../../core/index.js';
import type { HashStore } from '../../ra/hash-store/hash-store.js';
import { hashSecret } from '../../ra/accounts/secrets.js';
import { parseBody } from '../body-parser.js';
import { refuseNul } from '../refuse-nul.js';
import { logFailure, retryAfter, toCertdeskError } from '../envelope.js';
import { redactingLogger, secretInQuery } from '../log-redaction.js';
import { DEFAULT_REQUEST_TIMEOUT_MS, requestTimeoutOptions } from '../server-timeouts.js';
import { notReady, type Readiness } from '../ops/routes.js';

export interface KvAppDeps {
  readonly hashStore: Pick<HashStore, 'file' | 'lookup'>;
  /** pino logger; false for none (tests). Keys and other secrets are kept out of it (log-redaction.ts). */
  readonly logger: Logger | false;
  /** Milliseconds a request (headers and body) may take to arrive before a 408 (default 30 s). */
  readonly requestTimeout?: number;
  /** Largest request body in bytes (default 16 KiB: a hash is at most 512 characters). */
  readonly bodyLimit?: number;
  /** Requests per minute per presented key (default 1200). */
  readonly rateLimitPerKey?: number;
  /** Failed authentications per minute per client address (IPv6: per /64) before 429 (default 60). */
  readonly rateLimitFailedAuth?: number;
  /** Take the client address from X-Forwarded-For (only behind a trusted proxy). */
  readonly trustProxy?: TrustProxy;
  /** The parts the listener needs (the database), for /readyz; without it /readyz reports none. */
  readonly ready?: () => Promise<Readiness>;
}

export type KvApp = FastifyInstance;

/** The hash store's status per error kind; it answers 400 for bad input where /rest/v1 says 417. */
const KV_STATUS: Partial<Record<ErrorKind, number>> = {
  malformedRequest: 400,
  invalidInput: 400,
  invalidName: 400,
  unauthenticated: 401,
  notFound: 404,
  payloadTooLarge: 413,
  rateLimited: 429,
};

/**
 * Builds the hash store listener of spec 4.35 / DESIGN §5.8, a Fastify instance of its own
 * (it listens on CERTDESK_KV_PORT, apart from the API):
 * - `POST /<name>` with `x-api-key` and `{"hash": "…"}` (JSON whatever the Content-Type says,
 *   or a form body) → 200 `{"message":"success"}`;
 * - `GET /<name>` with `x-api-key` → 200 `text/plain` `<hash>\n`, or 404 `{"message":"not found"}`;
 * - the key is taken from `x-api-key` only: a key (or any secret-named parameter) in the URL
 *   query → 400, and it is not used (URLs are logged, by proxies and by us);
 * - missing/unknown/revoked key → 401, bad name or hash → 400, too many failed keys from one
 *   address → 429 with Retry-After; every failure is `{"message": "…"}` and only a fault of
 *   ours is a 5xx. Every response carries Content-Length;
 * - `GET /healthz` (the process is up) and `GET /readyz` (the database answers), without a key.
 */
export async function buildKvApp(deps: KvAppDeps): Promise<KvApp> {
  const app = Fastify({
    loggerInstance: deps.logger === false ? undefined : redactingLogger(deps.logger),
    logger: deps.logger === false ? false : undefined,
    bodyLimit: deps.bodyLimit ?? 16 * 1024,
    trustProxy: fastifyTrustProxy(deps.trustProxy ?? false),
    genReqId: () => randomUUID(),
    // A load balancer's checks, every few seconds, would fill the log.
    disableRequestLogging: (request) => request.url === '/healthz' || request.url === '/readyz',
    // Host names run to 253 characters (the router's default cap is 100); longer ones reach the
    // name check and get a 400 rather than a bare 404.
    routerOptions: { maxParamLength: 2048, ignoreTrailingSlash: true },
    // The original Apache module ends its request lines with a bare LF (DESIGN §5.8). Node's
    // default, strict parser (llhttp; checked on Node 20.20) answers those with 400, as the first
    // test of test/kv.test.ts shows.
    // The lenient parser is the only switch that accepts them, so it is turned on for this
    // listener alone, never the API's. Its risk is request smuggling through a front proxy that
    // frames requests differently; the hook below refuses the ambiguous framings it would let in.
    // A client may not hold a request open forever (slow headers or bodies): 408 and close.
    ...requestTimeoutOptions(deps.requestTimeout ?? DEFAULT_REQUEST_TIMEOUT_MS, { insecureHTTPParser: true }),
    // Typed with Fastify's base logger, as the API app is: pino's Logger type is narrower.
  }) as unknown as KvApp;

  // Refuse the framings the lenient parser tolerates and a proxy might read otherwise: a body
  // length given both ways, or a transfer coding other than plain chunked. The connection closes.
  app.addHook('onRequest', async (request, reply) => {
    const te = request.headers['transfer-encoding'];
    if (te === undefined) return;
    if (request.headers['content-length'] !== undefined || te.trim().toLowerCase() !== 'chunked') {
      void reply.header('connection', 'close');
      return reply.code(400).send({ message: 'ambiguous request framing: Transfer-Encoding must be "chunked" alone' });
    }
    return undefined;
  });

  // A key in the URL has already leaked (proxy and access logs keep URLs): refuse it, unused,
  // before anything reads a key, so the module's operator finds out and moves it to the header.
  app.addHook('onRequest', async (request, reply) => {
    const param = secretInQuery(request.query);
    if (param === undefined) return undefined;
    request.log.info({ param }, 'hash store request refused: secret in the URL query');
    return reply.code(400).send({
      message: `The URL query carries a secret (${param}): send the key in the x-api-key header only, and replace a key that was sent in a URL.`,
    });
  });

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (request, body, done) => {
    try {
      done(null, parseBody(body as string, request.headers['content-type']));
    } catch (e) {
      // Whatever the parser throws on a client's bytes is the client's fault: 400, never 500.
      done(
        new CertdeskError(
          'malformedRequest',
          `The request body is neither JSON nor a form: ${e instanceof Error ? e.message : String(e)}`,
        ),
        undefined,
      );
    }
  });

  // No U+0000 in the name or the body (refuse-nul.ts): 400, as for any other bad name or hash.
  app.addHook('preValidation', (request, _reply, done) => {
    refuseNul(request);
    done();
  });

  // Two buckets (per process, DESIGN §2): every request with a key counts against that key,
  // generously; failed authentications count against the client address, and only they are
  // refused once it is spent, so a flood of wrong keys cannot lock out valid modules sharing
  // the address (a hosting server serving many customers' sites).
  await app.register(rateLimit, { global: false });
  const perKey = app.createRateLimit({
    max: deps.rateLimitPerKey ?? 1200,
    timeWindow: 60_000,
    keyGenerator: (request) => `k:${hashSecret(apiKeyOf(request) ?? '').slice(0, 32)}`,
  });
  const failedAuth = app.createRateLimit({ max: deps.rateLimitFailedAuth ?? 60, timeWindow: 60_000 });

  app.addHook('onRequest', async (request, reply) => {
    if (apiKeyOf(request) === undefined) return;
    const limit = await perKey(request);
    if (!limit.isAllowed && limit.isExceeded) return tooMany(reply, limit.ttlInSeconds);
    return undefined;
  });

  app.setErrorHandler(async (error, request, reply) => {
    const err = toCertdeskError(error);
    if (err.kind === 'unauthenticated') {
      const limit = await failedAuth(request);
      if (!limit.isAllowed && limit.isExceeded) return tooMany(reply, limit.ttlInSeconds);
    }
    return sendFailure(request, reply, err, error);
  });
  app.setNotFoundHandler((_request, reply) => reply.code(404).send({ message: 'not found' }));

  // A hash name has two labels at least (normalizeHostName), so these two are never one. No key
  // is asked for: a load balancer's health check has none.
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (request, reply) => {
    const checks = (await deps.ready?.()) ?? {};
    const problems = notReady(checks);
    if (problems === undefined) return { status: 'ready', checks };
    request.log.warn({ checks }, 'readiness check failed');
    return reply
      .code(503)
      .header('retry-after', '5')
      .send({ message: `The hash store is not ready: ${problems}.`, checks });
  });

  app.post<{ Params: { name: string } }>('/:name', async (request, reply) => {
    const body = request.body;
    const hash =
      body !== null && typeof body === 'object' && !Array.isArray(body)
        ? (body as Record<string, unknown>).hash
        : undefined;
    await deps.hashStore.file(apiKeyOf(request), request.params.name, hash, request.ip);
    return reply.code(200).send({ message: 'success' });
  });

  app.get<{ Params: { name: string } }>('/:name', async (request, reply) => {
    const hash = await deps.hashStore.lookup(apiKeyOf(request), request.params.name);
    if (hash === undefined) return reply.code(404).send({ message: 'not found' });
    // The module serves this body as the validation file: the hash is its last line.
    return reply.code(200).type('text/plain; charset=utf-8').send(`${hash}\n`);
  });

  return app;
}

/** The `x-api-key` header; undefined when absent, empty or repeated. */
function apiKeyOf(request: FastifyRequest): string | undefined {
  const key = request.headers['x-api-key'];
  return typeof key === 'string' && key.trim() !== '' ? key.trim() : undefined;
}

function tooMany(reply: FastifyReply, retryAfterSeconds: number): FastifyReply {
  return reply
    .code(429)
    .header('retry-after', String(Math.max(1, retryAfterSeconds)))
    .send({ message: `Too many requests: retry in ${Math.max(1, retryAfterSeconds)} s.` });
}

function sendFailure(
  request: FastifyRequest,
  reply: FastifyReply,
  err: CertdeskError,
  original: unknown,
): FastifyReply {
  const status = KV_STATUS[err.kind] ?? errorRow(err.kind).status;
  const retry = retryAfter(err, original);
  if (retry !== undefined) void reply.header('retry-after', retry);
  if (status >= 500) {
    logFailure(request, err, original, 'hash store request');
    return err.kind === 'notReady'
      ? reply.code(503).send({ message: err.message })
      : reply.code(500).send({ message: 'internal server error' });
  }
  request.log.info({ kind: err.kind, field: err.field }, 'hash store request refused');
  return reply.code(status).send({ message: err.hasMessage ? err.message : errorRow(err.kind).message });
}
