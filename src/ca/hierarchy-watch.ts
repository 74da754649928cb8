// Keeping a process's CA hierarchy current (DESIGN §2): loads run one after another, news of a
// change made elsewhere (`ca init`, `ca distrust`) arrive on the deployment's broadcast, and a
// periodic comparison with the stored hierarchy makes good news that were lost.
import type { CacheBroadcast } from '../core/index.js';
import type { CaCertificateRow } from '../storage/index.js';

const HIERARCHY_TOPIC = 'ca-hierarchy';

type CaCertificateState = Pick<CaCertificateRow, 'id' | 'distrust_phase1' | 'distrust_phase2'>;

export interface HierarchyWatchDeps {
  /** Reads the keys and CA certificates and puts them in use; throws to keep what was in use. */
  readonly loadNow: () => Promise<void>;
  /** The CA certificates in use, by id. */
  readonly loaded: () => ReadonlyMap<string, { readonly row: CaCertificateState }>;
  /** Each stored CA certificate's id and distrust dates. */
  readonly stored: () => Promise<CaCertificateState[]>;
}

export class HierarchyWatch {
  /** The deployment's broadcast (`connect`): news of a changed hierarchy. */
  private news: CacheBroadcast | undefined;
  /** The timer of `connect`'s comparisons with the stored hierarchy. */
  private recheck: NodeJS.Timeout | undefined;
  /** The last load begun (`load`). */
  private loading: Promise<void> = Promise.resolve();

  constructor(private readonly o: HierarchyWatchDeps) {}

  /**
   * Loads the hierarchy. Loads run one after another (a broadcast's, a recheck's, this process's
   * own change): the last begun is the last applied, so an older read never replaces a newer one.
   */
  load(): Promise<void> {
    return this.between(() => this.o.loadNow());
  }

  /**
   * Runs `change`, this process's own change of the hierarchy (`init` adding keys and CA
   * certificates to what is loaded), between loads: none begins while it runs, so none can put
   * back a hierarchy read before a key or certificate it stored was there.
   */
  between<T>(change: () => Promise<T>): Promise<T> {
    const next = this.loading.then(change);
    this.loading = next.then(
      () => undefined,
      () => undefined,
    );
    return next;
  }

  /**
   * Hears the other processes' changes of the hierarchy (a CA certificate created, one distrusted)
   * and tells them of this one's (`loadEverywhere`): each process then loads the keys and CA
   * certificates again, so none goes on issuing under a distrusted intermediate, or answering OCSP
   * for a new one's leaves `unauthorized`, until it is restarted. A load that fails keeps what was
   * loaded before. News can be lost (the announcing process killed after its commit, a cut
   * broadcast, a command announcing where nobody listens): every `recheckSeconds` (0: never) the
   * stored hierarchy is compared with the loaded one, and loaded again when it differs. A load that
   * fails (a key file that no longer opens the keys, the database away) goes to `onError` and is
   * tried again then.
   */
  connect(broadcast: CacheBroadcast, recheckSeconds = 0, onError: (err: Error) => void = () => undefined): void {
    this.news = broadcast;
    broadcast.subscribe(HIERARCHY_TOPIC, () => void this.load().catch(onError));
    clearInterval(this.recheck);
    if (recheckSeconds > 0) {
      this.recheck = setInterval(() => void this.loadIfChanged().catch(onError), recheckSeconds * 1000);
      this.recheck.unref();
    }
  }

  /** Loads the hierarchy as it now is, and has every other process load it too. */
  async loadEverywhere(): Promise<void> {
    await this.load();
    await this.news?.publish(HIERARCHY_TOPIC);
  }

  /** Stops comparing with the stored hierarchy (shutdown). */
  stop(): void {
    clearInterval(this.recheck);
  }

  /** Loads the hierarchy again when a CA certificate was added, removed or distrusted since it was loaded. */
  private async loadIfChanged(): Promise<void> {
    const stored = await this.o.stored();
    const loaded = this.o.loaded();
    const same =
      stored.length === loaded.size &&
      stored.every((s) => {
        const row = loaded.get(s.id)?.row;
        return row?.distrust_phase1 === s.distrust_phase1 && row.distrust_phase2 === s.distrust_phase2;
      });
    if (!same) await this.load();
  }
}
