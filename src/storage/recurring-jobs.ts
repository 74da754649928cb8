import type { JobId } from '../core/index.js';
import type { JobName, JobPayloads } from '../core/jobs.js';
import type { JobsRepo } from './jobs-repo.js';

/**
 * Makes sure the periodic job `name` exists exactly once, under the unique key
 * `recurring:<name>`. Returns the id of the job that holds the key.
 *
 * The pattern: `main.ts` calls this at start (`after` omitted: the job runs at `now`, unless a
 * run is already queued or running, which is kept). The handler does its work and then calls it
 * again with `after: ctx.id`, which hands the key from the running job to its successor at
 * `now + everySeconds`. If the process dies after the handoff, the re-run of the old job finds
 * the successor holding the key and adds nothing; if it dies before, the re-run hands off then.
 * A recurring job that goes dead breaks the chain until the next start calls this again.
 */
export async function ensureRecurring<N extends JobName>(
  repo: Pick<JobsRepo, 'enqueue'>,
  name: N,
  payload: JobPayloads[N],
  everySeconds: number,
  now: number,
  options: { readonly after?: JobId } = {},
): Promise<JobId> {
  const uniqueKey = `recurring:${name}`;
  const base = { name, payload, uniqueKey };
  const result =
    options.after === undefined
      ? await repo.enqueue({ ...base, runAt: now }, now)
      : await repo.enqueue({ ...base, runAt: now + everySeconds, takeKeyFrom: options.after }, now);
  return result.id;
}
