import type { JobId } from './ids.js';

/**
 * The payload of each job, by job name. This interface is the closed list of jobs: a new job is
 * one new member here, and the worker's handler registry then fails to compile until it has a
 * handler for it (STYLE "Workers"). Payloads are stored as JSON, so keep them plain data.
 */
export interface JobPayloads {
  /**
   * Housekeeping: delete OAuth tokens that have expired. Recurring (`ensureRecurring`); the
   * handler purges what expired before its own `now`, so it needs no parameters.
   */
  'housekeeping.purge': Record<string, never>;
  /** Re-signs every CRL older than half its validity (CRLs must be renewed at least every 7 days). Recurring. */
  'ca.refresh-crls': Record<string, never>;
  /** Checks the pending DCV of an order and, once every name is shown, issues. Re-queues itself until done or expired. */
  'order.validate': { readonly orderId: number };
  /** Daily: subscriptions whose certificate expires within 30 days get their free reissue. Recurring. */
  'order.renew-subscriptions': Record<string, never>;
  /** Daily: DCV and expiry reminders by mail to the order's contacts. Recurring. */
  'notify.reminders': Record<string, never>;
  /**
   * Revokes every certificate of an order that is not revoked yet. Queued with a cancel, in its
   * transaction: the cancel revokes at once, and this job finishes the work if the process died first.
   */
  'order.revoke-certificates': { readonly orderId: number; readonly reason: 'cessationOfOperation' };
  /**
   * The vulnerability assessment of an order (feature WVS): scans its names and stores a report.
   * Weekly while the assessment is Active (each run queues the next at the order's slot of the
   * week); `now: true` is an on-demand rescan, which queues nothing after it.
   */
  'scan.vulnerability': { readonly orderId: number; readonly now?: boolean };
  /** The ConfigurationAssessment of an issued order: queued at issuance and reissue, due some days later. */
  'scan.configuration': { readonly orderId: number };
  /**
   * Sends one mail of the outbox over SMTP. Queued with the mail when SMTP is configured (so no
   * request waits on an SMTP server), retried with the worker's backoff until sent or dead.
   */
  'mail.deliver': { readonly mailId: number };
}

/** The name of a job: a closed union derived from `JobPayloads`. */
export type JobName = keyof JobPayloads;

// A Record over the union, so forgetting a name here is a compile error too.
const NAMES: Record<JobName, true> = {
  'housekeeping.purge': true,
  'ca.refresh-crls': true,
  'order.validate': true,
  'order.renew-subscriptions': true,
  'notify.reminders': true,
  'order.revoke-certificates': true,
  'scan.vulnerability': true,
  'scan.configuration': true,
  'mail.deliver': true,
};

/** Every job name this build knows: a worker claims only these (`JobsRepo.claimDue`). */
export const JOB_NAMES: readonly JobName[] = Object.freeze(Object.keys(NAMES) as JobName[]);

/**
 * Whether a name read back from the database is one this build knows. A job written by a newer
 * version during a rolling upgrade may carry a name that is not (yet) in the union.
 */
export function isJobName(name: string): name is JobName {
  return Object.hasOwn(NAMES, name);
}

/**
 * Where a job is in its life: `queued` (waiting for `run_at`), `running` (leased by a worker
 * until `lease_expires_at`), `done`, or `dead` (gave up after too many attempts).
 */
export type JobStatus = 'queued' | 'running' | 'done' | 'dead';

export const JOB_STATUSES: readonly JobStatus[] = Object.freeze(['queued', 'running', 'done', 'dead']);

/**
 * A job as a handler sees it. Without a type argument it is the discriminated union over every
 * name, so `switch (job.name)` narrows the payload.
 */
export type Job<N extends JobName = JobName> = N extends JobName
  ? {
      readonly id: JobId;
      readonly name: N;
      readonly payload: JobPayloads[N];
      /** How many times the job has been claimed, this run included (1 on the first run). */
      readonly attempts: number;
      /** When the job became due, in whole UTC seconds. */
      readonly runAt: number;
    }
  : never;
