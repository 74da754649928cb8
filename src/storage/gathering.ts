/**
 * The calls of one statement that a PostgreSQL transaction's units make in the same turn, run as
 * one set-based statement. A batch's units run side by side in its transaction (core
 * `TransactionBatch`), but Kysely runs a transaction's statements one after another, each a round
 * trip to the server: the INSERTs of twenty orders placed together were twenty round trips, and
 * gathered they are one. A call made alone runs as it would without (`one`), so a transaction of
 * one unit sends the same statement as ever.
 *
 * A gathered statement fails for all its callers at once: the batch's transaction fails, and its
 * units run again each alone (`TransactionBatch`), where one unit's refusal (a PartnerOrderID
 * taken) stays its own.
 */
export class Gathering {
  private readonly open = new Map<string, { arg: unknown; resolve(v: unknown): void; reject(e: unknown): void }[]>();

  /**
   * `one(arg)`, or `many` of every argument given under `kind` in this turn (once the turn's
   * synchronous work and microtasks so far are done): `many` answers each argument at its index.
   */
  run<A, R>(
    kind: string,
    arg: A,
    one: (arg: A) => Promise<R>,
    many: (args: readonly A[]) => Promise<readonly R[]>,
  ): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      let calls = this.open.get(kind);
      if (calls === undefined) {
        calls = [];
        this.open.set(kind, calls);
        queueMicrotask(() => this.flush(kind, one as (arg: unknown) => Promise<unknown>, many as never));
      }
      calls.push({ arg, resolve: resolve as (v: unknown) => void, reject });
    });
  }

  private flush(
    kind: string,
    one: (arg: unknown) => Promise<unknown>,
    many: (args: readonly unknown[]) => Promise<readonly unknown[]>,
  ): void {
    const calls = this.open.get(kind)!;
    this.open.delete(kind);
    const answers = (async () => {
      if (calls.length === 1) return [await one(calls[0]!.arg)];
      const vs = await many(calls.map((c) => c.arg));
      if (vs.length !== calls.length) throw new Error(`${kind}: ${vs.length} answers for ${calls.length} calls`);
      return vs;
    })();
    answers.then(
      (vs) => calls.forEach((c, i) => c.resolve(vs[i])),
      (e: unknown) => calls.forEach((c) => c.reject(e)),
    );
  }
}
