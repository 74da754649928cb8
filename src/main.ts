// Composition root: the one place that builds everything. Reading it shows the dependency graph.
import 'reflect-metadata';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import pino, { type DestinationStream, type Logger } from 'pino';
import type { Config } from './config/index.js';
import { ServiceUrls, systemClock, type Clock } from './core/index.js';
import { DcvResolver } from './validation/index.js';
import {
  BuiltinCa,
  SealedKeyStore,
  ocspMemory,
  readOrCreateKeyFile,
  secretMac,
  secretSealer,
  type IssuerWithCapabilities,
} from './ca/index.js';
import { brandHierarchies, caKeyFile, caRoots } from './ca-setup.js';
import { recordingIssuer } from './ca/recording-issuer.js';
import { Accounts } from './ra/accounts/accounts.js';
import { HashStore } from './ra/hash-store/hash-store.js';
import { Housekeeping } from './ra/housekeeping/housekeeping.js';
import { CatalogService, loadCatalog } from './ra/catalog/catalog.js';
import { OAuth } from './ra/accounts/oauth.js';
import { DcvData } from './ra/dcv/dcv-data.js';
import { EmailApprovals } from './ra/dcv/email-approval.js';
import { Mailer, mailFrom, smtpTransport } from './ra/mail/mail.js';
import { Notifier } from './ra/mail/notify.js';
import { OrderFlow } from './ra/issuance/order-flow.js';
import { Lifecycle } from './ra/orders/lifecycle.js';
import { Reissues } from './ra/orders/reissues.js';
import { OrderReads } from './ra/orders/order-reads.js';
import { Users } from './ra/accounts/users.js';
import { Applications } from './ra/accounts/applications.js';
import { SignIn } from './ra/accounts/sign-in.js';
import { SessionTokens } from './ra/accounts/session-tokens.js';
import { SignInThrottle } from './ra/accounts/sign-in-throttle.js';
import { TwoFactor } from './ra/accounts/two-factor.js';
import { Orders } from './ra/orders/orders.js';
import { Reconciliation } from './ra/issuance/reconciliation.js';
import { Vetting } from './ra/orders/vetting.js';
import { Operators } from './ra/operators/operators.js';
import { OperatorConsole } from './ra/operators/operator-console.js';
import { Pki } from './ra/issuance/pki.js';
import { PrincipalCache } from './ra/accounts/principal-cache.js';
import { Shop } from './ra/catalog/shop.js';
import { Tools } from './ra/tools/tools.js';
import { CodeGuessing } from './ra/vouchers/code-guessing.js';
import { Vouchers } from './ra/vouchers/vouchers.js';
import { Assessments, type Scanner } from './ra/scans/assessments.js';
import { scanHost } from './scan/index.js';
import {
  localBroadcast,
  openMigrated,
  postgresBroadcast,
  redisBroadcast,
  redisHeartbeat,
  repositories,
  unitOfWork,
  type Broadcast,
  type Db,
  OperatorsRepo,
} from './storage/index.js';
import { logRedaction } from './web/log-redaction.js';
import { createMetrics } from './web/ops/metrics.js';
// The parts a process runs over the services (worker, HTTP app), for the callers that import them from here.
export { createWebApp, createWorker, kvReadiness } from './process-parts.js';
export { caKeyFile, initCa } from './ca-setup.js';
export type { Services } from './services.js';
import type { Services } from './services.js';

export interface ServiceOptions {
  readonly clock?: Clock;
  /** Collect process metrics (off in tests, where many apps share a process). */
  readonly defaultMetrics?: boolean;
  /** An open, migrated database to use instead of the configured one (tests). */
  readonly db?: Db;
  /** Where a lost idle database connection is reported (the pool replaces it). */
  readonly logger?: Logger;
  /** An issuer to sign orders with instead of the built-in CA (tests of the Issuer seam). */
  readonly issuer?: IssuerWithCapabilities;
  /** What scans a name instead of src/scan's scanner (tests of the scan schedule, reports and mails). */
  readonly scanner?: Scanner;
}

/** How long a Redis command may go unanswered before it fails (the rate limiter then lets the request pass). */
export const REDIS_COMMAND_TIMEOUT_MS = 1000;
/** How long a Redis connection is idle before TCP keepalive probes start. */
const REDIS_KEEPALIVE_MS = 30_000;

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
  const onConnectionError = (err: Error) =>
    options.logger?.warn({ err }, 'an idle database connection failed; it will be replaced');
  const db =
    options.db ??
    (await openMigrated(
      {
        url: databaseUrl(config),
        prepared: config.databasePrepared,
        queryTimeoutMs: config.databaseQueryTimeoutMs,
        onConnectionError,
      },
      {
        onLockWait: ({ migration, attempt, attempts }) =>
          options.logger?.warn(
            { migration, attempt, attempts },
            'a migration waited for locks that other transactions hold; it let their traffic pass and tries again',
          ),
      },
    ));

  // Every repository once, and the unit of work that hands a transaction's repositories to a component.
  const repos = repositories(db);
  const transact = unitOfWork(db);
  const urls = new ServiceUrls(config.publicUrl ?? '');
  const { applications, audit, tokens, dcvValues, jobs } = repos;

  const accounts = new Accounts({ ...repos, transact, clock, currencies: catalog.currencies() });
  const shop = new Shop({ catalog });
  const tools = new Tools({ catalog, dcvValues, clock, blockedNames: config.blockedNames });
  const principals = new PrincipalCache(config.authCacheSeconds * 1000);
  const throttle = new SignInThrottle({ ...repos, clock });
  const users = new Users({ ...repos, transact, principals, clock, throttle });
  const applicationManager = new Applications({ ...repos, transact, principals, clock });
  const signIn = new SignIn({ ...repos, clock, throttle });
  // The key file's key opens the CA keys and, under keys derived from it, other sealed secrets.
  const keyFile = caKeyFile(config);
  const kek = readOrCreateKeyFile(keyFile);
  const twoFactor = new TwoFactor({ ...repos, clock, throttle, sealer: secretSealer(kek, 'totp secrets') });
  const sessionTokens = new SessionTokens({ tokens, audit, clock, mac: secretMac(kek, 'web session tokens') });
  const oauth = new OAuth({
    applications,
    tokens,
    codes: repos.oauthCodes,
    audit,
    clock,
    principals,
    accessTtl: config.tokenTtl,
    refreshTtl: config.refreshTokenTtl,
  });
  const hashStore = new HashStore({ kv: repos.kv, audit, clock });
  const housekeeping = new Housekeeping({ expired: repos.expired, jobs, clock });
  const metrics = createMetrics({
    defaultMetrics: options.defaultMetrics ?? false,
    jobCounts: () => jobs.countByStatus(),
    jobsOverdue: () => jobs.overdueSeconds(clock.nowSeconds()),
    orphanCount: async () => (await repos.orderCertificates.orphanCertificates(10_000)).length,
  });

  // The CA opens its sealed keys now: a wrong key file stops the start here, with its reason.
  const ocspAnswers = ocspMemory();
  const ca = new BuiltinCa({
    repo: repos.ca,
    audit,
    keys: new SealedKeyStore(repos.ca, kek, keyFile),
    clock,
    transact: (fn, options) => transact((r) => fn({ repo: r.ca, audit: r.audit, repos: r }), options),
    urls,
    brands: brandHierarchies(catalog),
    ...(config.caMaxValidityDays === undefined ? {} : { privateMaxDays: config.caMaxValidityDays }),
    ocspMemory: ocspAnswers,
  });
  await ca.load();
  // What the RA signs with: the built-in CA, or (tests, later an upstream CA) another issuer whose
  // certificates are then recorded by the same rules.
  const issuer = recordingIssuer(options.issuer ?? ca, { repo: repos.ca, transact, clock });
  const pki = new Pki({ ca, jobs, clock });
  const resolver = new DcvResolver(config.dnsServers === undefined ? {} : { servers: config.dnsServers });
  const dcvData = new DcvData({ catalog, dcvValues, clock, resolver });
  const mailRepo = repos.mail;
  const mailer = new Mailer({
    repo: mailRepo,
    transact: (fn) => transact((r) => fn({ mail: r.mail })),
    jobs,
    clock,
    ...(options.logger === undefined ? {} : { logger: options.logger }),
    transport: config.smtpUrl === undefined ? null : await smtpTransport(config.smtpUrl, mailFrom(urls)),
  });
  const notifier = new Notifier({ ...repos, mailer, mail: mailRepo, jobs, clock, urls });
  const orderFlow = new OrderFlow({
    ...repos,
    catalog,
    clock,
    ca: issuer,
    resolver,
    notify: notifier,
    file: { httpPort: config.validationHttpPort, allowPrivate: config.validationAllowPrivate },
    configurationScanDelay: config.scanDelayDays * 86_400,
    blockedNames: config.blockedNames,
    transact,
    ...(options.logger === undefined ? {} : { logger: options.logger }),
  });
  const emailApprovals = new EmailApprovals({
    ...repos,
    audit,
    mailer,
    transact,
    flow: orderFlow,
    resolver,
    clock,
    urls,
  });
  const orderReads = new OrderReads({ ...repos, certificates: issuer, catalog, clock });
  const orders = new Orders({
    ...repos,
    catalog,
    clock,
    blockedNames: config.blockedNames,
    reads: orderReads,
    flow: orderFlow,
    approvals: emailApprovals,
    transact,
    ...(options.logger === undefined ? {} : { logger: options.logger }),
  });
  const vouchers = new Vouchers({
    ...repos,
    placing: orders,
    reads: orderReads,
    catalog,
    guessing: new CodeGuessing({ ...repos, clock }),
    sealer: secretSealer(kek, 'voucher codes'),
    clock,
    transact,
  });
  // Scans look at customers' sites under the DCV address rule, resolving through the DCV resolver,
  // and trust the built-in CA's roots besides the system's.
  const assessments = new Assessments({
    ...repos,
    certificates: issuer,
    mailer,
    catalog,
    clock,
    concurrency: config.scanConcurrency,
    scanner:
      options.scanner ??
      ((target) =>
        scanHost(target, {
          lookup: (name) => resolver.addresses(name),
          allowPrivate: config.validationAllowPrivate,
          port: config.scanPort,
          httpPort: config.scanHttpPort,
          timeoutMs: config.scanTimeoutMs,
          trustedRoots: caRoots(ca, catalog),
          now: () => clock.nowSeconds(),
        })),
  });
  const vetting = new Vetting({ ...repos, flow: orderFlow, clock });
  // Operators: accounts of their own, throttled under o:<username>, TOTP seeds sealed apart from users'.
  const operatorAccounts = new Operators({
    operators: new OperatorsRepo(db),
    audit,
    clock,
    throttle: new SignInThrottle({ ...repos, clock, accountPrefix: 'o:' }),
    sealer: secretSealer(kek, 'operator totp secrets'),
  });
  const operatorConsole = new OperatorConsole({
    accounts,
    customers: repos.customers,
    principals,
    vetting,
    ca,
    caRepo: repos.ca,
    mail: mailRepo,
    jobs,
    audit,
    clock,
  });
  const lifecycle = new Lifecycle({ ...repos, catalog, clock, ca: issuer, notify: notifier, transact });
  const reissues = new Reissues({
    ...repos,
    catalog,
    clock,
    flow: orderFlow,
    approvals: emailApprovals,
    blockedNames: config.blockedNames,
    recurring: jobs,
    mailer,
    transact,
    ...(options.logger === undefined ? {} : { logger: options.logger }),
  });
  const reconciliation = new Reconciliation({ ...repos, ca: issuer, audit, clock });

  // Redis when configured (rate limits shared by every process, and the broadcast); else the
  // database's LISTEN/NOTIFY carries the news between processes (SQLite: one process, itself).
  const onRedisError = (err: Error) => options.logger?.warn({ err }, 'Redis is unreachable; retrying');
  // ioredis is loaded only when configured: a process without Redis (every CLI command of the
  // default install) never loads it.
  const redis =
    config.redisUrl === undefined
      ? undefined
      : new (await import('ioredis')).Redis(config.redisUrl, {
          maxRetriesPerRequest: 1,
          connectTimeout: 2000,
          // A Redis that stops answering without closing the connection (a cut path, a NAT that
          // dropped the flow, a stalled server) fails each command after a second instead of
          // holding it, and every request waiting on the rate limiter with it, for good: the
          // limiter lets requests pass on an error. TCP keepalive finds such a connection dead.
          commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
          keepAlive: REDIS_KEEPALIVE_MS,
        }).on('error', onRedisError);
  // A Redis path that died silently is found by a PING every few seconds, and the connection opened
  // again: after two unanswered in a row, since this client's commands time out after a second and
  // a Redis busy for a second or two (a fork for a snapshot) is not a dead path.
  const stopRedisHeartbeat = redis === undefined ? undefined : redisHeartbeat(redis, onRedisError, { misses: 2 });
  let broadcast: Broadcast;
  try {
    broadcast =
      redis !== undefined
        ? await redisBroadcast(redis, `${config.redisPrefix}:broadcast`, { onError: onRedisError })
        : db.dialect === 'postgres' && db.url !== undefined
          ? await postgresBroadcast(db, db.url, { onError: onConnectionError })
          : localBroadcast();
  } catch (err) {
    // A start that fails here leaves nothing open behind it: the Redis connection and its
    // heartbeat, the database opened here.
    stopRedisHeartbeat?.();
    redis?.disconnect();
    if (options.db === undefined) await db.close();
    throw err;
  }
  principals.connect(broadcast);
  ocspAnswers.connect(broadcast);
  ca.connect(broadcast, config.caRecheckSeconds, (err) =>
    options.logger?.warn({ err }, 'loading the CA hierarchy again failed; the one loaded before stays in use'),
  );

  const close = async () => {
    await ca.flush();
    await broadcast.close();
    stopRedisHeartbeat?.();
    redis?.disconnect();
    // A database given by the caller stays the caller's to close.
    if (options.db === undefined) await db.close();
  };
  return {
    config,
    clock,
    db,
    accounts,
    oauth,
    catalog,
    shop,
    tools,
    metrics,
    jobs,
    housekeeping,
    hashStore,
    ca,
    pki,
    orders,
    orderReads,
    users,
    applications: applicationManager,
    signIn,
    twoFactor,
    sessionTokens,
    orderFlow,
    dcvData,
    emailApprovals,
    mailRepo,
    mailer,
    vetting,
    operators: operatorAccounts,
    operatorConsole,
    lifecycle,
    reissues,
    vouchers,
    assessments,
    notifier,
    reconciliation,
    redis,
    broadcast,
    close,
  };
}

/** A pino logger that never writes secrets; to stdout unless given another destination. */
export function createLogger(config: Pick<Config, 'logLevel'>, destination?: DestinationStream): Logger {
  return pino({ level: config.logLevel, ...logRedaction }, destination);
}

/** Which parts a process runs: `serve` runs all three; `worker` and `kv` one each. */
