// Child process of test/order-crash.test.ts: a job worker over the services the CERTDESK_* settings
// of its environment describe (the same database and CA key file as the test). Every certificate
// the CA signs here is announced on stdout as "signed <serial>" once it is recorded; with
// CRASH_AFTER_SIGNING=1 the signing call then never returns, so the parent can kill the process
// between signing and completing the order. Its one-second lease is renewed while it is alive.
import pino from 'pino';
import { loadConfig } from '../../src/config/index.js';
import { Worker, type Handlers, type WorkerLogger } from '../../src/jobs/index.js';
import { createServices } from '../../src/main.js';

const crashAfterSigning = process.env.CRASH_AFTER_SIGNING === '1';
// The test's own settings (CRASH_AFTER_SIGNING, CERTDESK_TEST_*) are not CERTDESK_ settings.
const services = await createServices(loadConfig(process.env), { logger: pino({ level: 'silent' }) });

// OrderFlow calls `issue` on this very object: replacing the method here is what the flow sees.
const issue = services.ca.issue.bind(services.ca);
services.ca.issue = async (req) => {
  const issued = await issue(req);
  process.stdout.write(`signed ${issued.serial}\n`);
  if (crashAfterSigning) await new Promise<never>(() => undefined);
  return issued;
};

const quiet = () => undefined;
const logger: WorkerLogger = {
  info: quiet,
  warn: (obj, msg) => console.error(msg, obj),
  error: (obj, msg) => console.error(msg, obj),
};
// createWorker's handlers, with a one-second lease (createWorker takes no lease option).
const handlers = {
  'housekeeping.purge': async () => undefined,
  'ca.refresh-crls': async () => undefined,
  'order.validate': (payload, ctx) => services.orderFlow.validate(payload, ctx),
  'order.renew-subscriptions': async () => undefined,
  'notify.reminders': async () => undefined,
  'order.revoke-certificates': async () => undefined,
  'scan.vulnerability': async () => undefined,
  'scan.configuration': async () => undefined,
  'mail.deliver': async () => undefined,
} satisfies Handlers;
new Worker({
  repo: services.jobs,
  handlers,
  clock: services.clock,
  logger,
  leaseSeconds: 1,
  pollIntervalMs: 100,
  concurrency: 1,
}).start();
process.stdout.write(`ready ${process.pid}\n`);
// The poll loop keeps the process alive; this makes sure of it while a handler hangs.
setInterval(() => undefined, 1000);
