import Fastify, { LogController } from 'fastify';
import rateLimit from '@fastify/rate-limit';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { addressGroup, CertdeskError } from '../core/index.js';
import { addAuthEnforcement, addAuthResolution } from './auth.js';
import { parseBody } from './body-parser.js';
import { refuseNul } from './refuse-nul.js';
import { applyAliases, canonicalUrl } from './compat.js';
import { handleError, handleNotFound } from './envelope.js';
import { registerOps, type OpsDeps } from './ops/routes.js';
import { registerOpenApi } from './ops/openapi.js';
import { registerOAuth } from './oauth/routes.js';
import { registerPki, type PkiDeps } from './pki/routes.js';
import { registerApprovalPage } from './dcv/approval.js';
import { cookieOf, registerSignIn } from './ui/sign-in.js';
import type { SessionTokens } from '../ra/accounts/session-tokens.js';
import type { Redis } from 'ioredis';
import { registerTwoFactor } from './ui/two-factor.js';
import { registerAssets } from './ui/assets.js';
import { registerRedeemPage } from './ui/redeem.js';
import { registerConsole } from './ui/console/profile.js';
import type { HashStore } from '../ra/hash-store/hash-store.js';
import { registerOperatorPages } from './ui/operator/index.js';
import type { Operators } from '../ra/operators/operators.js';
import type { OperatorConsole } from '../ra/operators/operator-console.js';
import type { SignIn } from '../ra/accounts/sign-in.js';
import type { TwoFactor } from '../ra/accounts/two-factor.js';
import { registerRest, type RestDeps } from './rest/index.js';
import { fastifyTrustProxy, type TrustProxy } from './trust-proxy.js';
import { redactingLogger } from './log-redaction.js';
import { sendTogether } from './send-together.js';
import { DEFAULT_REQUEST_TIMEOUT_MS, requestTimeoutOptions } from './server-timeouts.js';
import type { AccessEntry, App } from './types.js';

export interface WebOptions {
  readonly bodyLimit: number;
  readonly trustProxy: TrustProxy;
  /** Requests per minute per API application (all its tokens together). */
  readonly rateLimit: number;
  /** Requests per minute per client address without a valid token. */
  readonly rateLimitAnonymous: number;
  readonly publicUrl: string;
  /** pino logger; false for none (tests, benchmarks). Secrets are kept out of it (log-redaction.ts). */
  readonly logger: Logger | false;
  /** Milliseconds a request (headers and body) may take to arrive before a 408 (default 30 s). */
  readonly requestTimeout?: number;
  /** Redis (CERTDESK_REDIS_URL): the rate limits' counters, shared by every process; without it each process counts alone. */
  readonly redis?: { readonly client: Redis; readonly namespace: string };
}

export type WebDeps = RestDeps &
  OpsDeps &
  PkiDeps &
  OperatorDeps &
  Parameters<typeof registerOAuth>[1] & {
    readonly signIn: SignIn;
    readonly twoFactor: TwoFactor;
    readonly sessionTokens: SessionTokens;
    readonly hashStore: HashStore;
  };

/** What the operator screens need (their sign-in and console). */
type OperatorDeps = { readonly operators: Operators; readonly operatorConsole: OperatorConsole };

/**
 * Builds the HTTP front end: /rest/v1, /oauth2, operations routes and the OpenAPI document.
 * Every route is parse → one ra call → render; errors leave as the DESIGN §5.1 envelope.
 */
export async function buildApp(options: WebOptions, deps: WebDeps): Promise<App> {
  const app = Fastify({
    loggerInstance: options.logger === false ? undefined : redactingLogger(options.logger),
    logger: options.logger === false ? false : undefined,
    bodyLimit: options.bodyLimit,
    trustProxy: fastifyTrustProxy(options.trustProxy),
    // A caller's X-Request-Id is kept when it is a sane token, else replaced (it goes into logs).
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && /^[\w.:-]{1,64}$/.test(given) ? given : randomUUID();
    },
    // Health probes and metric scrapes would drown the request log.
    logController: new LogController({
      requestIdLogLabel: 'requestId',
      disableRequestLogging: (request) => ['/healthz', '/readyz', '/metrics'].includes(request.url),
    }),
    // Query strings go through the same tolerant rules as bodies; keep Fastify's coercion on.
    ajv: { customOptions: { coerceTypes: 'array', allErrors: true, removeAdditional: false, useDefaults: true } },
    // FQDNs in paths reach 253 characters; the router's default limit is 100.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 512 },
    // Errors the router raises before any route (bad URL encoding) leave as the envelope too.
    frameworkErrors: (error, request, reply) => handleError(error, request, reply),
    // A client may not hold a request open forever (slow headers or bodies): 408 and close.
    ...requestTimeoutOptions(options.requestTimeout ?? DEFAULT_REQUEST_TIMEOUT_MS),
    // Misspelled paths of the original service (DESIGN §5.2) reach their canonical routes.
    rewriteUrl: (req) => canonicalUrl(req.url ?? '/'),
    // An idle socket (keep-alive or not) closes after 60 s without traffic.
    connectionTimeout: 60_000,
  }).withTypeProvider<TypeBoxTypeProvider>() as unknown as App;

  app.setErrorHandler(handleError);
  // The request id (ours, or the caller's X-Request-Id) goes back on every response, for support.
  app.addHook('onRequest', (request, reply, done) => {
    void reply.header('x-request-id', request.id);
    done();
  });
  app.setNotFoundHandler(handleNotFound);
  // The responses of one event-loop turn leave together, in its check phase (send-together.ts).
  sendTogether(app);

  // Step 1: bodies. One parser for every content type (DESIGN §5.2): JSON whatever the label.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (request, body, done) => {
    try {
      done(null, parseBody(body as string, request.headers['content-type']));
    } catch (e) {
      done(e as Error, undefined);
    }
  });

  // Step 2: who is calling, rate limits by application (or user) or else by address, then scope and role checks.
  addAuthResolution(app, deps.oauth);
  // The web interface's pages carry no bearer: a signed-in person's count against the person, as
  // the API calls behind them do (u:<id>), not against an address an office may share.
  app.addHook('onRequest', (request, _reply, done) => {
    const cookie = request.rateKey === undefined ? cookieOf(request) : undefined;
    if (cookie === undefined) return done();
    deps.signIn.session(cookie).then((signedIn) => {
      if (signedIn !== undefined) request.rateKey = `u:${signedIn.user.id}`;
      done();
    }, done);
  });
  await app.register(rateLimit, {
    global: true,
    timeWindow: 60_000,
    // An anonymous client by its address, an IPv6 one by its /64 (it could rotate through it).
    keyGenerator: (request) => request.rateKey ?? `a:${addressGroup(request.ip)}`,
    // Shared counters when there is a Redis; should it fail, requests pass (the limits protect,
    // they must not take the service down with Redis) and the failure is logged.
    ...(options.redis === undefined
      ? {}
      : { redis: options.redis.client, nameSpace: options.redis.namespace, skipOnError: true }),
    max: (_request, key) => (key.startsWith('a:') ? options.rateLimitAnonymous : options.rateLimit),
    // Limit headers only on 429 (with Retry-After): on every response they cost ~5 % of a cheap request.
    addHeadersOnExceeding: { 'x-ratelimit-limit': false, 'x-ratelimit-remaining': false, 'x-ratelimit-reset': false },
    addHeaders: {
      'x-ratelimit-limit': true,
      'x-ratelimit-remaining': true,
      'x-ratelimit-reset': true,
      'retry-after': true,
    },
    errorResponseBuilder: (_request, context) =>
      Object.assign(
        new CertdeskError('rateLimited', `Too many requests: retry in ${Math.ceil(context.ttl / 1000)} s.`),
        {
          statusCode: 429,
          retryAfter: Math.ceil(context.ttl / 1000),
        },
      ),
  });
  addAuthEnforcement(app);
  app.addHook('preValidation', (request, _reply, done) => {
    // No U+0000 in path, query or body (refuse-nul.ts): refused, naming the field, before any route runs.
    refuseNul(request);
    applyAliases(request.query);
    applyAliases(request.body);
    done();
  });

  // Step 3: routes, recording who may call each (docs/access.md is generated from this).
  const accessTable: AccessEntry[] = [];
  app.decorate('accessTable', accessTable);
  app.addHook('onRoute', (route) => {
    const access = route.config?.access;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (access !== undefined)
      for (const method of methods) if (method !== 'HEAD') accessTable.push({ method, url: route.url, access });
  });
  await registerOpenApi(app, options.publicUrl);
  registerOps(app, deps);
  registerOAuth(app, deps);
  await registerPki(app, deps);
  registerApprovalPage(app, deps);
  // The session cookie is Secure wherever the service is reached over https.
  registerSignIn(app, { ...deps, secureCookies: options.publicUrl.startsWith('https:') });
  registerTwoFactor(app, deps);
  registerAssets(app);
  registerRedeemPage(app);
  registerConsole(app, { ...deps, publicUrl: options.publicUrl });
  registerOperatorPages(app, { ...deps, secureCookies: options.publicUrl.startsWith('https:') });
  await app.register(async (rest) => registerRest(rest as App, deps), { prefix: '/rest/v1' });
  return app;
}
