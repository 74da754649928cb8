// The process: runs the roles of `certdesk serve`, `worker` and `kv` over the services the
// composition root (main.ts) builds, and drains them on SIGTERM/SIGINT.
import type { KeyPairSource } from './ca/key-pairs.js';
import type { Config } from './config/index.js';
import type { Worker } from './jobs/index.js';
import { createLogger, createServices, createWebApp, createWorker, initCa, kvReadiness } from './main.js';
import { buildKvApp, type KvApp } from './web/kv/server.js';
import type { App } from './web/types.js';

/**
 * The Node.js flags certdesk's processes run with: `bin/certdesk`'s first line passes them (a test
 * holds the two equal), and the benchmark's servers get them too. A young generation of 2 × 32 MiB
 * instead of V8's 2 × 16 MiB: under load the objects of the requests in flight (an order's CSR,
 * checks, rows and certificate) outlive a 16 MiB nursery, were copied and promoted, and died in the
 * old generation. Same-hour pairs on the bench machine (docs/architecture.md, "Hot paths"): POST
 * /Order inline +20 % on SQLite and +13-27 % on PostgreSQL; the cheap routes level.
 */
export const NODE_FLAGS = ['--max-semi-space-size=32'] as const;

export interface Roles {
  readonly api: boolean;
  readonly worker: boolean;
  readonly kv: boolean;
}

export interface RunOptions {
  /** CA key pairs already being made (a first start begins them before the modules load: see cli/main.ts). */
  readonly keyPairs?: KeyPairSource;
}

/**
 * Runs the given roles in this process: the API listener, the job worker and the hash-store
 * listener. Resolves once listening; SIGTERM/SIGINT close the listeners, let requests and jobs
 * in flight finish, close the database and exit 0.
 */
export async function run(
  config: Config,
  roles: Roles,
  options: RunOptions = {},
): Promise<{ app?: App; stop: () => Promise<void> }> {
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
      void stop().then(
        () => process.exit(0),
        (err: unknown) => {
          logger.error({ err }, 'shutdown failed');
          process.exit(1);
        },
      );
    });
  }

  try {
    // First start: the CA hierarchy of every brand, made while the web app is built (its keys are
    // made in the thread pool). Listening waits for both: a listening API can issue.
    const caReady =
      (roles.api || roles.worker) && !services.ca.isInitialized()
        ? initCa(services.ca, logger, config, options.keyPairs)
        : undefined;
    const building = roles.api
      ? (async () => {
          app = await createWebApp(services, logger);
          await app.ready();
        })()
      : undefined;
    const [ca, web] = await Promise.allSettled([caReady, building]);
    if (ca.status === 'rejected') throw ca.reason;
    if (web.status === 'rejected') throw web.reason;
    if (app !== undefined) await app.listen({ host: config.host, port: config.port });
    if (roles.kv && config.kvPort !== 0) {
      kvApp = await buildKvApp({
        hashStore: services.hashStore,
        logger: logger.child({ listener: 'kv' }),
        trustProxy: config.trustProxy,
        requestTimeout: config.requestTimeoutMs,
        ready: () => kvReadiness(services, logger),
      });
      await kvApp.listen({ host: config.host, port: config.kvPort });
    }
    if (roles.worker) {
      worker = createWorker(services, logger);
      await services.housekeeping.schedule();
      await services.pki.schedule();
      await services.reissues.scheduleRenewals();
      await services.notifier.schedule();
      worker.start();
    }
  } catch (err) {
    // A role that cannot start (a port taken) stops the others: no half-started service.
    await stop();
    throw err;
  }
  logger.info(
    {
      url: app === undefined ? undefined : config.publicUrl,
      kvPort: kvApp === undefined ? undefined : config.kvPort,
      worker: worker !== undefined,
    },
    'certdesk is running',
  );
  return { ...(app === undefined ? {} : { app }), stop };
}
