// Composition root: the one place that builds everything. Reading it shows the dependency graph.
import 'reflect-metadata';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import pino, { type DestinationStream, type Logger } from 'pino';
import type { Config } from './config/index.js';
import { systemClock, type Clock } from './core/index.js';
import { Worker, type Handlers } from './jobs/index.js';
import { Accounts } from './ra/accounts.js';
import { HashStore } from './ra/hash-store.js';
import { Housekeeping } from './ra/housekeeping.js';
import { CatalogService, loadCatalog } from './ra/catalog.js';
import { OAuth } from './ra/oauth.js';
import { PrincipalCache } from './ra/principal-cache.js';
import { Shop } from './ra/shop.js';
import { Tools } from './ra/tools.js';
import {
  ApplicationsRepo, AuditRepo, CustomersRepo, DcvValuesRepo, JobsRepo, KvRepo, TokensRepo, UsersRepo, inTransaction, migrateToLatest, openDatabase, pingDatabase, type Db,
} from './storage/index.js';
import { buildApp } from './web/app.js';
import { buildKvApp, type KvApp } from './web/kv/server.js';
import { createMetrics, type Metrics } from './web/ops/metrics.js';
import type { App } from './web/types.js';

export interface Services {
  readonly config: Config;
  readonly clock: Clock;
  readonly db: Db;
  readonly accounts: Accounts;
  readonly oauth: OAuth;
  readonly catalog: CatalogService;
  readonly shop: Shop;
  readonly tools: Tools;
  readonly metrics: Metrics;
  readonly jobs: JobsRepo;
  readonly housekeeping: Housekeeping;
  readonly hashStore: HashStore;
  close(): Promise<void>;
}

export interface ServiceOptions {
  readonly clock?: Clock;
  /** Collect process metrics (off in tests, where many apps share a process). */
  readonly defaultMetrics?: boolean;
  /** An open, migrated database to use instead of the configured one (tests). */
  readonly db?: Db;
  /** Where a lost idle database connection is reported (the pool replaces it). */
  readonly logger?: Logger;
}

/** Where the database lives: CERTDESK_DATABASE_URL, else `certdesk.db` in the data directory. */
export function databaseUrl(config: Config): string {
  if (config.databaseUrl !== undefined && config.databaseUrl !== '') return config.databaseUrl;
  const dir = resolve(config.dataDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return join(dir, 'certdesk.db');
}

/** Opens and migrates the database and builds every component. */
export async function createServices(config: Config, options: ServiceOptions = {}): Promise<Services> {
  const clock = options.clock ?? systemClock;
  // The catalog is read before the database is touched: a bad catalog file stops the start.
  const catalog = new CatalogService(loadCatalog(config.catalog));
  const onConnectionError = (err: Error) => options.logger?.warn({ err }, 'an idle database connection failed; it will be replaced');
  const db = options.db ?? (await openDatabase({ url: databaseUrl(config), onConnectionError }));
  if (options.db === undefined) await migrateToLatest(db);

  const accountRepos = (d: Db) => ({
    customers: new CustomersRepo(d), users: new UsersRepo(d), applications: new ApplicationsRepo(d), audit: new AuditRepo(d),
  });
  const { applications, audit } = accountRepos(db);
  const tokens = new TokensRepo(db);

  const accounts = new Accounts({
    ...accountRepos(db),
    transact: (fn) => inTransaction(db, (tx) => fn(accountRepos(tx))),
    clock,
    currencies: catalog.currencies(),
  });
  const shop = new Shop({ catalog });
  const dcvValues = new DcvValuesRepo(db);
  const tools = new Tools({ catalog, dcvValues, clock, blockedNames: config.blockedNames });
  const principals = new PrincipalCache(config.authCacheSeconds * 1000);
  const oauth = new OAuth({ applications, tokens, audit, clock, principals, accessTtl: config.tokenTtl, refreshTtl: config.refreshTokenTtl });
  const hashStore = new HashStore({ kv: new KvRepo(db), audit, clock });
  const jobs = new JobsRepo(db);
  const housekeeping = new Housekeeping({ tokens, dcvValues, jobs, clock });
  const metrics = createMetrics({ defaultMetrics: options.defaultMetrics ?? false, jobCounts: () => jobs.countByStatus() });

  return { config, clock, db, accounts, oauth, catalog, shop, tools, metrics, jobs, housekeeping, hashStore, close: () => db.close() };
}

/** A pino logger that never writes secrets; to stdout unless given another destination. */
export function createLogger(config: Pick<Config, 'logLevel'>, destination?: DestinationStream): Logger {
  return pino({
    level: config.logLevel,
    redact: {
      paths: ['req.headers.authorization', '*.client_secret', '*.password', '*.access_token', '*.refresh_token', '*.Password', '*.PrivateKey'],
      censor: '[redacted]',
    },
  }, destination);
}

/** The job worker with every handler; `satisfies Handlers` makes a missing one a compile error. */
export function createWorker(services: Services, logger: Logger): Worker {
  const { housekeeping } = services;
  const handlers = {
    'housekeeping.purge': (payload, ctx) => housekeeping.purgeExpired(payload, ctx),
  } satisfies Handlers;
  return new Worker({ repo: services.jobs, handlers, clock: services.clock, logger: logger.child({ component: 'worker' }) });
}

/** The HTTP app over the services. */
export function createWebApp(services: Services, logger: Logger | false): Promise<App> {
  const { config } = services;
  return buildApp(
    {
      bodyLimit: config.bodyLimit,
      trustProxy: config.trustProxy,
      rateLimit: config.rateLimit,
      rateLimitAnonymous: config.rateLimitAnonymous,
      publicUrl: config.publicUrl ?? '',
      logger,
    },
    {
      accounts: services.accounts,
      oauth: services.oauth,
      shop: services.shop,
      tools: services.tools,
      metrics: services.metrics,
      ready: () => pingDatabase(services.db),
    },
  );
}

/** Which parts a process runs: `serve` runs all three; `worker` and `kv` one each. */
export interface Roles {
  readonly api: boolean;
  readonly worker: boolean;
  readonly kv: boolean;
}

/**
 * Runs the given roles in this process: the API listener, the job worker and the hash-store
 * listener. Resolves once listening; SIGTERM/SIGINT close the listeners, let requests and jobs
 * in flight finish, close the database and exit 0.
 */
export async function run(config: Config, roles: Roles): Promise<{ app?: App; stop: () => Promise<void> }> {
  const logger = createLogger(config);
  const services = await createServices(config, { defaultMetrics: true, logger });
  let app: App | undefined;
  let kvApp: KvApp | undefined;
  let worker: Worker | undefined;

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      logger.info('shutting down: draining requests and jobs');
      await Promise.all([app?.close(), kvApp?.close(), worker?.stop()]);
      await services.close();
      logger.info('stopped');
    })();
    return stopping;
  };
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      // Requests and jobs get a bounded time to finish; a stuck one must not block the exit.
      setTimeout(() => {
        logger.error('shutdown took longer than 40 s: exiting anyway');
        process.exit(1);
      }, 40_000).unref();
      void stop().then(() => process.exit(0), (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      });
    });
  }

  try {
    if (roles.api) {
      app = await createWebApp(services, logger);
      await app.listen({ host: config.host, port: config.port });
    }
    if (roles.kv && config.kvPort !== 0) {
      kvApp = await buildKvApp({ hashStore: services.hashStore, logger: logger.child({ listener: 'kv' }), trustProxy: config.trustProxy });
      await kvApp.listen({ host: config.host, port: config.kvPort });
    }
    if (roles.worker) {
      worker = createWorker(services, logger);
      await services.housekeeping.schedule();
      worker.start();
    }
  } catch (err) {
    // A role that cannot start (a port taken) stops the others: no half-started service.
    await stop();
    throw err;
  }
  logger.info({ url: app === undefined ? undefined : config.publicUrl, kvPort: kvApp === undefined ? undefined : config.kvPort, worker: worker !== undefined }, 'certdesk is running');
  return { ...(app === undefined ? {} : { app }), stop };
}
