// What a process runs over the services: the job worker with every handler, and the HTTP app
// with its readiness probe. The services themselves are built in main.ts (createServices).
import type { Logger } from 'pino';
import { withinTime } from './core/index.js';
import { Worker, type Handlers } from './jobs/index.js';
import type { Services } from './services.js';
import { pingDatabase } from './storage/index.js';
import { buildApp } from './web/app.js';
import type { App } from './web/types.js';

/** The job worker with every handler; `satisfies Handlers` makes a missing one a compile error. */
export function createWorker(services: Services, logger: Logger): Worker {
  const { housekeeping } = services;
  const handlers = {
    'housekeeping.purge': (payload, ctx) => housekeeping.purgeExpired(payload, ctx),
    'ca.refresh-crls': (payload, ctx) => services.pki.refreshCrls(payload, ctx),
    'order.validate': (payload, ctx) => services.orderFlow.validate(payload, ctx),
    'order.renew-subscriptions': (payload, ctx) => services.reissues.renewJob(payload, ctx),
    'notify.reminders': (payload, ctx) => services.notifier.reminders(payload, ctx),
    'order.revoke-certificates': (payload) => services.lifecycle.revokeCertificatesJob(payload),
    'scan.vulnerability': (payload, ctx) => services.assessments.runVulnerability(payload, ctx),
    'scan.configuration': (payload) => services.assessments.runConfiguration(payload),
    'mail.deliver': (payload) => services.mailer.deliver(payload),
  } satisfies Handlers;
  return new Worker({
    repo: services.jobs,
    handlers,
    clock: services.clock,
    logger: logger.child({ component: 'worker' }),
  });
}

/** How long /readyz waits for the database's or Redis's answer (one behind a path that hangs never answers). */
export const PROBE_MS = 5_000;

/**
 * Ready (/readyz): the database answers, Redis (when configured) answers, this process hears the
 * others' changes (the broadcast's connection is up: else a revoked token or certificate would be
 * honoured here until its cache's bound), and the CA can sign on every chain (a first start
 * listens only then). The database and Redis are asked at once, each for at most PROBE_MS. Error
 * texts go to the log, not to the answer.
 */
async function readiness(services: Services, logger: Logger | false): Promise<Record<string, string>> {
  const probe = (part: string, check: () => Promise<unknown>) => probed(part, check, logger);
  const redis = services.redis;
  const [database, redisState] = await Promise.all([
    probe('database', () => pingDatabase(services.db)),
    redis === undefined ? 'not configured' : probe('redis', () => redis.ping()),
  ]);
  return {
    database,
    redis: redisState,
    broadcast:
      services.broadcast.transport === 'local'
        ? 'not configured'
        : services.broadcast.listening()
          ? 'ok'
          : 'not listening',
    caKeys: services.ca.isInitialized() ? 'ok' : 'the CA hierarchy is not complete yet',
  };
}

/** `ok` when `check` resolves within PROBE_MS, else `unreachable` (the reason logged). */
async function probed(part: string, check: () => Promise<unknown>, logger: Logger | false): Promise<string> {
  try {
    await withinTime(check(), PROBE_MS, part);
    return 'ok';
  } catch (err) {
    if (logger !== false) logger.warn({ err }, `readiness: ${part} failed`);
    return 'unreachable';
  }
}

/** Ready for the hash store listener (`kv`): the database answers, within PROBE_MS. */
export async function kvReadiness(services: Services, logger: Logger | false): Promise<Record<string, string>> {
  return { database: await probed('database', () => pingDatabase(services.db), logger) };
}

/** The HTTP app over the services. */
export function createWebApp(services: Services, logger: Logger | false): Promise<App> {
  const { config } = services;
  return buildApp(
    {
      bodyLimit: config.bodyLimit,
      requestTimeout: config.requestTimeoutMs,
      trustProxy: config.trustProxy,
      rateLimit: config.rateLimit,
      rateLimitAnonymous: config.rateLimitAnonymous,
      publicUrl: config.publicUrl ?? '',
      logger,
      ...(services.redis === undefined
        ? {}
        : { redis: { client: services.redis, namespace: `${config.redisPrefix}:rl:` } }),
    },
    {
      accounts: services.accounts,
      oauth: services.oauth,
      shop: services.shop,
      tools: services.tools,
      metrics: services.metrics,
      // Ready: the database answers and the CA can sign on every chain (a first start listens only then).
      ready: () => readiness(services, logger),
      pki: services.pki,
      orders: services.orders,
      orderReads: services.orderReads,
      vouchers: services.vouchers,
      assessments: services.assessments,
      users: services.users,
      applications: services.applications,
      signIn: services.signIn,
      twoFactor: services.twoFactor,
      sessionTokens: services.sessionTokens,
      hashStore: services.hashStore,
      orderFlow: services.orderFlow,
      dcvData: services.dcvData,
      emailApprovals: services.emailApprovals,
      operators: services.operators,
      operatorConsole: services.operatorConsole,
      lifecycle: services.lifecycle,
      reissues: services.reissues,
      clock: services.clock,
    },
  );
}
