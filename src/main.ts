// Composition root: the one place that builds everything. Reading it shows the dependency graph.
import 'reflect-metadata';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import pino, { type DestinationStream, type Logger } from 'pino';
import type { Config } from './config/index.js';
import { systemClock, type Clock } from './core/index.js';
import { DcvResolver } from './validation/index.js';
import { BuiltinCa, SealedKeyStore, readOrCreateKeyFile, type BrandHierarchy } from './ca/index.js';
import { Worker, type Handlers } from './jobs/index.js';
import { Accounts } from './ra/accounts.js';
import { HashStore } from './ra/hash-store.js';
import { Housekeeping } from './ra/housekeeping.js';
import { CatalogService, loadCatalog } from './ra/catalog.js';
import { OAuth } from './ra/oauth.js';
import { DcvData } from './ra/dcv-data.js';
import { EmailApprovals } from './ra/email-approval.js';
import { Mailer, mailFrom, smtpTransport } from './ra/mail.js';
import { Notifier } from './ra/notify.js';
import { OrderFlow } from './ra/order-flow.js';
import { Lifecycle } from './ra/lifecycle.js';
import { Orders } from './ra/orders.js';
import { Vetting } from './ra/vetting.js';
import { Pki } from './ra/pki.js';
import { PrincipalCache } from './ra/principal-cache.js';
import { Shop } from './ra/shop.js';
import { Tools } from './ra/tools.js';
import {
  ApplicationsRepo, AuditRepo, CaRepo, CustomersRepo, MailRepo, OrdersRepo, DcvValuesRepo, JobsRepo, KvRepo, TokensRepo, UsersRepo, inTransaction, migrateToLatest, openDatabase, pingDatabase, type Db,
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
  readonly ca: BuiltinCa;
  readonly pki: Pki;
  readonly orders: Orders;
  readonly orderFlow: OrderFlow;
  readonly dcvData: DcvData;
  readonly emailApprovals: EmailApprovals;
  readonly mailRepo: MailRepo;
  readonly vetting: Vetting;
  readonly lifecycle: Lifecycle;
  readonly notifier: Notifier;
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

  // The CA opens its sealed keys now: a wrong key file stops the start here, with its reason.
  const keyFile = caKeyFile(config);
  const caRepos = (d: Db) => ({ repo: new CaRepo(d), audit: new AuditRepo(d) });
  const ca = new BuiltinCa({
    ...caRepos(db),
    keys: new SealedKeyStore(new CaRepo(db), readOrCreateKeyFile(keyFile), keyFile),
    clock,
    transact: (fn) => inTransaction(db, (tx) => fn(caRepos(tx))),
    publicUrl: config.publicUrl ?? '',
    brands: brandHierarchies(catalog),
    ...(config.caMaxValidityDays === undefined ? {} : { privateMaxDays: config.caMaxValidityDays }),
  });
  await ca.load();
  const pki = new Pki({ ca, jobs, clock });
  const orderRepos = (d: Db) => ({ orders: new OrdersRepo(d), audit: new AuditRepo(d), jobs: new JobsRepo(d) });
  const resolver = new DcvResolver(config.dnsServers === undefined ? {} : { servers: config.dnsServers });
  const dcvData = new DcvData({ catalog, dcvValues, clock, resolver });
  const mailRepo = new MailRepo(db);
  const mailer = new Mailer({
    repo: mailRepo, clock, ...(options.logger === undefined ? {} : { logger: options.logger }),
    transport: config.smtpUrl === undefined ? null : smtpTransport(config.smtpUrl, mailFrom(config.publicUrl ?? 'http://localhost')),
  });
  const notifier = new Notifier({ mailer, mail: mailRepo, orders: new OrdersRepo(db), jobs, clock, publicUrl: config.publicUrl ?? '' });
  const orderFlow = new OrderFlow({
    ...orderRepos(db), catalog, clock, ca, jobs, resolver, notify: notifier,
    file: { httpPort: config.validationHttpPort, allowPrivate: config.validationAllowPrivate },
    transact: (fn) => inTransaction(db, (tx) => fn(orderRepos(tx))),
  });
  const emailApprovals = new EmailApprovals({ orders: new OrdersRepo(db), audit, mailer, flow: orderFlow, resolver, clock, publicUrl: config.publicUrl ?? '' });
  const orders = new Orders({
    ...orderRepos(db), catalog, dcvValues, clock, blockedNames: config.blockedNames, certificates: ca, flow: orderFlow, approvals: emailApprovals,
    transact: (fn) => inTransaction(db, (tx) => fn(orderRepos(tx))),
  });

  const vetting = new Vetting({ orders: new OrdersRepo(db), audit, flow: orderFlow, clock });
  const lifecycleRepos = (d: Db) => ({ orders: new OrdersRepo(d), audit: new AuditRepo(d), jobs: new JobsRepo(d) });
  const lifecycle = new Lifecycle({
    ...lifecycleRepos(db), catalog, clock, ca, dcvValues, flow: orderFlow, approvals: emailApprovals, blockedNames: config.blockedNames, recurring: jobs, mailer, notify: notifier,
    transact: (fn) => inTransaction(db, (tx) => fn(lifecycleRepos(tx))),
  });

  const close = async () => {
    await ca.flush();
    await db.close();
  };
  return { config, clock, db, accounts, oauth, catalog, shop, tools, metrics, jobs, housekeeping, hashStore, ca, pki, orders, orderFlow, dcvData, emailApprovals, mailRepo, vetting, lifecycle, notifier, close };
}

/** CERTDESK_CA_KEY_FILE, else `ca-keys.secret` in the data directory. */
export function caKeyFile(config: Config): string {
  if (config.caKeyFile !== undefined && config.caKeyFile !== '') return config.caKeyFile;
  const dir = resolve(config.dataDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return join(dir, 'ca-keys.secret');
}

/** The CA's view of each catalog brand: its hierarchy id, chains, and whether it sells code signing or S/MIME. */
function brandHierarchies(catalog: CatalogService): BrandHierarchy[] {
  const types = new Map<string, Set<string>>();
  for (const code of catalog.productCodes()) {
    const p = catalog.product(code);
    if (!types.has(p.brand)) types.set(p.brand, new Set());
    types.get(p.brand)!.add(p.type);
  }
  return catalog.brands().map((b) => ({
    id: b.id, name: b.name, issuer: b.issuer, signatureHashAlgorithms: b.signatureHashAlgorithms,
    codeSigning: types.get(b.id)?.has('CODESIGN') ?? false, smime: types.get(b.id)?.has('SMIME') ?? false,
  }));
}

/** `ca init`, tolerant of another process doing the same at the same moment. */
export async function initCa(ca: BuiltinCa, logger: Pick<Logger, 'info' | 'warn'>, config: Pick<Config, 'caRsaRootBits' | 'caRsaIntermediateBits'>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      const created = await ca.init({ log: (line) => logger.info(line), rsaRootBits: config.caRsaRootBits, rsaIntermediateBits: config.caRsaIntermediateBits });
      if (created.length > 0) logger.info({ created }, 'CA hierarchy created');
      return;
    } catch (err) {
      await ca.load();
      if (ca.isInitialized()) return;
      if (attempt >= 5) throw err;
      logger.warn({ err }, 'CA init raced with another process: retrying');
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
}

/** A pino logger that never writes secrets; to stdout unless given another destination. */
export function createLogger(config: Pick<Config, 'logLevel'>, destination?: DestinationStream): Logger {
  return pino({
    level: config.logLevel,
    serializers: {
      // Capability URLs (EMAIL approval links) carry their secret in the path: log the route, not the token.
      req: (req: { method?: string; url?: string; ip?: string; headers?: Record<string, unknown> }) => ({
        method: req.method,
        url: typeof req.url === 'string' ? req.url.replace(/\/dcv\/approve\/[^/?#]+/, '/dcv/approve/[redacted]') : req.url,
        remoteAddress: req.ip,
      }),
    },
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
    'ca.refresh-crls': (payload, ctx) => services.pki.refreshCrls(payload, ctx),
    'order.validate': (payload, ctx) => services.orderFlow.validate(payload, ctx),
    'order.renew-subscriptions': (payload, ctx) => services.lifecycle.renewJob(payload, ctx),
    'notify.reminders': (payload, ctx) => services.notifier.reminders(payload, ctx),
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
      pki: services.pki,
      orders: services.orders,
      dcvData: services.dcvData,
      emailApprovals: services.emailApprovals,
      lifecycle: services.lifecycle,
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
    // First start: the CA hierarchy of every brand (several processes starting at once: one creates, the others wait for it).
    if ((roles.api || roles.worker) && !services.ca.isInitialized()) await initCa(services.ca, logger, config);
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
      await services.pki.schedule();
      await services.lifecycle.scheduleRenewals();
      await services.notifier.schedule();
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
