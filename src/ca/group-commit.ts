/**
 * Group commit: items added while a write is in flight (or in the same tick) are written together
 * by one call of `write`, and every `add` resolves when its item is durable. Under load the CA's
 * two audit events and the certificate record cost one statement per batch instead of three per
 * certificate; alone, an item waits only for the next tick. `write` may refuse single items
 * (returning an error at an item's index) while the rest of the batch is written: that `add` rejects.
 */
export class GroupCommit<T> {
  private pending: { item: T; resolve: () => void; reject: (e: unknown) => void }[] = [];
  private running: Promise<void> | undefined;
  private scheduled = false;

  constructor(
    private readonly write: (items: T[]) => Promise<void | readonly (Error | undefined)[]>,
    private readonly maxBatch = 500,
  ) {}

  add(item: T): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      this.schedule();
    });
  }

  /** Resolves once nothing is pending or being written. */
  async idle(): Promise<void> {
    while (this.running !== undefined || this.pending.length > 0) {
      this.schedule();
      await (this.running ?? new Promise((r) => setImmediate(r)));
    }
  }

  private schedule(): void {
    if (this.scheduled || this.running !== undefined) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    if (this.running !== undefined || this.pending.length === 0) return;
    const batch = this.pending.splice(0, this.maxBatch);
    this.running = this.write(batch.map((b) => b.item))
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
        this.running = undefined;
        if (this.pending.length > 0) this.schedule();
      });
  }
}
