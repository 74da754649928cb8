// Child process of test/jobs-crash.test.ts: a worker on the SQLite file named by argv[2] whose
// handler announces the job it holds ("claimed <id>" on stdout) and then hangs until the parent
// kills the process. It renews its lease (argv[3] seconds, default one) while alive, as a real
// worker would.
import { systemClock } from '../../src/core/index.js';
import { Worker, type Handlers, type WorkerLogger } from '../../src/jobs/index.js';
import { openDatabase } from '../../src/storage/index.js';
import { JobsRepo } from '../../src/storage/jobs-repo.js';

const file = process.argv[2];
if (file === undefined) throw new Error('usage: worker-child.ts <sqlite-file> [lease-seconds]');
const leaseSeconds = Number(process.argv[3] ?? '1');

const quiet = () => undefined;
const logger: WorkerLogger = { info: quiet, warn: quiet, error: (obj, msg) => console.error(msg, obj) };
const db = await openDatabase({ url: file });

const handlers = {
  'housekeeping.purge': async (_payload, ctx) => {
    process.stdout.write(`claimed ${ctx.id}\n`);
    await new Promise<never>(() => undefined);
  },
  'ca.refresh-crls': async () => undefined,
  'order.validate': async () => undefined,
  'order.renew-subscriptions': async () => undefined,
  'notify.reminders': async () => undefined,
  'order.revoke-certificates': async () => undefined,
  'scan.vulnerability': async () => undefined,
  'scan.configuration': async () => undefined,
  'mail.deliver': async () => undefined,
} satisfies Handlers;

new Worker({
  repo: new JobsRepo(db),
  handlers,
  clock: systemClock,
  logger,
  leaseSeconds,
  pollIntervalMs: 50,
  concurrency: 1,
}).start();
// The poll loop keeps the process alive; this makes sure of it while the handler hangs.
setInterval(() => undefined, 1000);
