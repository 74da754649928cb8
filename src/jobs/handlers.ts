import type { JobId } from '../core/index.js';
import type { JobName, JobPayloads } from '../core/jobs.js';

// The contract between the worker and the handlers it is given (RA methods, built in main.ts).

/** What a handler learns about the run besides its payload. */
export interface JobContext {
  readonly id: JobId;
  readonly name: JobName;
  /** 1 on the first run; a run after a crash or a lost lease counts too. */
  readonly attempts: number;
  /**
   * Aborted when this worker no longer holds the lease (it ran out and another worker took the
   * job) or gave the job up at the drain timeout. Handlers must be idempotent regardless.
   */
  readonly signal: AbortSignal;
}

/** Runs one job. Resolving marks it done; throwing retries it with backoff, then marks it dead. */
export type Handler<N extends JobName> = (payload: JobPayloads[N], ctx: JobContext) => Promise<void>;

/** The registry: one handler per job name. Build it with `satisfies Handlers` so a missing one fails to compile. */
export type Handlers = { readonly [N in JobName]: Handler<N> };

/** The part of a pino logger the worker uses. */
export interface WorkerLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}
