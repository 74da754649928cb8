import { CommitOutcomeUnknown } from './errors.js';

/**
 * Group commit: items added while a write is in flight (or in the same tick) are written together
 * by one call of `write`, and every `add` resolves when its item is durable. Under load the CA's
 * two audit events and the certificate record cost one statement per batch instead of three per
 * certificate; alone, an item waits only for the next tick. `write` may refuse single items
 * (returning an error at an item's index) while the rest of the batch is written: that `add` rejects.
 */
export class GroupCommit<T> {
  private pending: { item: T; resolve: () => void; reject: (e: unknown) => void }[] = [];
  /** The writes in flight (at most `maxInFlight`). */
  private readonly running = new Set<Promise<void>>();
  private scheduled = false;

  constructor(
    private readonly write: (items: T[]) => Promise<void | readonly (Error | undefined)[]>,
    private readonly maxBatch = 500,
    /**
     * How many writes may be in flight at once. With one, an item waits for the write in flight
     * and then for its own; with more, an item that comes while fewer are in flight is written at
     * once, alone or with what came in the same tick, and batches grow only when all are busy.
     */
    private readonly maxInFlight = 1,
  ) {}

  add(item: T): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      this.schedule();
    });
  }

  /** Resolves once nothing is pending or being written. */
  async idle(): Promise<void> {
    while (this.running.size > 0 || this.pending.length > 0) {
      this.schedule();
      await (this.running.size > 0 ? Promise.race(this.running) : new Promise((r) => setImmediate(r)));
    }
  }

  private schedule(): void {
    if (this.scheduled || this.running.size >= this.maxInFlight) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    if (this.running.size >= this.maxInFlight || this.pending.length === 0) return;
    const batch = this.pending.splice(0, this.maxBatch);
    const running: Promise<void> = this.write(batch.map((b) => b.item))
      .then(
        (refused) =>
          batch.forEach((b, i) => {
            const error = refused?.[i];
            if (error === undefined) b.resolve();
            else b.reject(error);
          }),
        (e: unknown) => batch.forEach((b) => b.reject(e)),
      )
      .finally(() => {
        this.running.delete(running);
        if (this.pending.length > 0) this.schedule();
      });
    this.running.add(running);
  }
}

/** What a transaction runner is asked besides the work. */
export interface TransactOptions {
  /**
   * Should the COMMIT's answer be lost (the connection dropped after the COMMIT was sent), find out
   * whether the database kept the transaction: the work's result if it did, the failure if it did
   * not, `CommitOutcomeUnknown` if that cannot be told. Costs a statement (on PostgreSQL, sent
   * with the BEGIN): asked for by `TransactionBatch`, whose units would otherwise run again over a
   * transaction that may have committed them, or answer a failure for an order that was kept.
   */
  readonly settleLostCommit?: boolean;
}

/** Runs `fn` in a transaction (a unit of work of storage's). */
export type Transact<Tx> = <T>(fn: (tx: Tx) => Promise<T>, options?: TransactOptions) => Promise<T>;

/** A unit of work of a `TransactionBatch`, and what became of it. */
interface Unit<Tx> {
  readonly work: (tx: Tx) => Promise<unknown>;
  done?: { value: unknown } | { error: unknown };
}

/** Every transaction of a batch: its units must not run again over a COMMIT that may have been kept. */
const SETTLED: TransactOptions = { settleLostCommit: true };

/**
 * Group commit of whole units of work: units started while `maxInFlight` transactions of them are
 * being written (or in the same tick) run side by side in the next one, which commits them
 * together. On SQLite that is one commit's WAL writes for many; on PostgreSQL one BEGIN and one
 * COMMIT. A unit that comes while fewer are in flight starts a transaction at once, so at light
 * load nothing waits for a batch (with one in flight, the paced POST /Order's p99 rose by half).
 * Each `run` gets its own unit's result. Should a unit throw, or the shared transaction fail, it
 * is rolled back whole and each of its units runs again alone, all at once, each in a transaction
 * of its own: a unit's failure stays its own, and the others commit as they would have alone. So
 * a unit is written as for any transaction (`inTransaction` reruns them on a conflict too): its
 * effects are the transaction's only, and it may run more than once. Not after a COMMIT whose
 * answer was lost, though: every transaction of a batch is run with `settleLostCommit`, so one
 * the database kept gives its units their results, and when the runner cannot tell whether it
 * committed, every unit fails with `CommitOutcomeUnknown` rather than run a second time over
 * what may be kept.
 *
 * What a unit writes becomes visible when its batch commits, not before; the units of a batch may
 * see some of each other's writes, in any order. Units must not depend on each other's absence,
 * nor on an order among them. Their statements go one at a time on the transaction's connection:
 * side by side, the ones they make in the same turn can be gathered into one (storage `Gathering`).
 */
export class TransactionBatch<Tx> {
  private readonly commit: GroupCommit<Unit<Tx>>;

  constructor(transact: Transact<Tx>, maxBatch = 64, maxInFlight = 2) {
    const alone = async (unit: Unit<Tx>) => {
      try {
        unit.done = { value: await transact(unit.work, SETTLED) };
      } catch (error) {
        unit.done = { error };
      }
    };
    this.commit = new GroupCommit(
      async (units) => {
        if (units.length > 1) {
          try {
            const values = await transact(async (tx) => {
              // Side by side: the statements the units make in one turn can go as one (storage `Gathering`).
              // The first failure in time is the transaction's: after it PostgreSQL refuses every
              // statement (25P02), and only the first tells a conflict the transaction's runner reruns.
              let first: { error: unknown } | undefined;
              const settled = await Promise.allSettled(
                units.map(async (unit) => {
                  try {
                    return await unit.work(tx);
                  } catch (error) {
                    first ??= { error };
                    throw error;
                  }
                }),
              );
              if (first !== undefined) throw first.error;
              return settled.map((s) => (s as PromiseFulfilledResult<unknown>).value);
            }, SETTLED);
            units.forEach((unit, i) => (unit.done = { value: values[i] }));
            return;
          } catch (error) {
            // Committed or not, nobody knows: running the units again could do each twice.
            if (error instanceof CommitOutcomeUnknown) {
              units.forEach((unit) => (unit.done = { error }));
              return;
            }
            // Rolled back whole: each unit again, alone (below).
          }
        }
        await Promise.all(units.map(alone));
      },
      maxBatch,
      maxInFlight,
    );
  }

  /** Runs `work` in a transaction shared with the units around it; resolves once that has committed. */
  async run<R>(work: (tx: Tx) => Promise<R>): Promise<R> {
    const unit: Unit<Tx> = { work };
    await this.commit.add(unit);
    const done = unit.done!;
    if ('error' in done) throw done.error;
    return done.value as R;
  }
}
