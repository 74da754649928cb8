import type { CustomerId } from '../core/index.js';
import type { Db } from './database.js';

/** How many live values a process keeps (`DcvValuesRepo.known`). */
const KNOWN_VALUES = 10_000;
/**
 * A kept value is read again this long before it expires: another process whose clock runs ahead
 * may replace it as expired a little before this one's clock says so.
 */
const KEPT_MARGIN_SECONDS = 300;

/** DCV values (DESIGN §5.6): one random value per (customer, CA brand, CSR SHA-256), valid 30 days. */
export class DcvValuesRepo {
  /**
   * Values this process read committed, until they expire. A live value never changes (only an
   * expired one is replaced, and only expired ones are deleted), so it is the value every process
   * reads until then: POST /Order after POST /DNSData for the same CSR reads it once. Values read
   * in a transaction are not kept (it may roll back); none is used in its last KEPT_MARGIN_SECONDS.
   */
  private readonly known = new Map<string, { value: string; expiresAt: number }>();

  constructor(private readonly db: Db) {}

  /**
   * The live value for the key, or `candidate` stored as the new value when there is none or the
   * old one expired. Concurrent callers all get the one value that won. Returns the value in force.
   */
  async getOrCreate(
    key: { customerId: CustomerId; caBrand: string; csrSha256: string },
    candidate: string,
    now: number,
    ttlSeconds: number,
  ): Promise<string> {
    const committed = !this.db.kysely.isTransaction;
    const id = `${key.customerId}|${key.caBrand}|${key.csrSha256}`;
    const known = committed ? this.known.get(id) : undefined;
    if (known !== undefined && known.expiresAt - KEPT_MARGIN_SECONDS > now) return known.value;
    const where = this.db.kysely
      .selectFrom('dcv_values')
      .select(['value', 'expires_at'])
      .where('customer_id', '=', key.customerId)
      .where('ca_brand', '=', key.caBrand)
      .where('csr_sha256', '=', key.csrSha256);
    const keep = (row: { value: string; expires_at: number }) => {
      if (!committed || row.expires_at - KEPT_MARGIN_SECONDS <= now) return row.value;
      this.known.delete(id);
      if (this.known.size >= KNOWN_VALUES) this.known.delete(this.known.keys().next().value as string);
      this.known.set(id, { value: row.value, expiresAt: row.expires_at });
      return row.value;
    };
    let existing = await where.executeTakeFirst();
    if (existing !== undefined && existing.expires_at > now) return keep(existing);
    // Twice at most: an expired row the housekeeping purge deletes between the read and the update
    // leaves nothing to update, and the second pass inserts.
    for (let pass = 0; ; pass++) {
      await this.store(key, existing !== undefined, candidate, now, ttlSeconds);
      const stored = await where.executeTakeFirst();
      if (stored !== undefined) return keep(stored);
      if (pass > 0) throw new Error('the DCV value was deleted while it was being stored');
      existing = undefined;
    }
  }

  /** `candidate` as the value: replacing an expired one (`replace`), or new. */
  private async store(
    key: { customerId: CustomerId; caBrand: string; csrSha256: string },
    replace: boolean,
    candidate: string,
    now: number,
    ttlSeconds: number,
  ): Promise<void> {
    if (replace) {
      // Guarded: only an expired value is replaced, so a racing renewal is not overwritten.
      await this.db.kysely
        .updateTable('dcv_values')
        .set({ value: candidate, created_at: now, expires_at: now + ttlSeconds })
        .where('customer_id', '=', key.customerId)
        .where('ca_brand', '=', key.caBrand)
        .where('csr_sha256', '=', key.csrSha256)
        .where('expires_at', '<=', now)
        .execute();
    } else {
      await this.db.kysely
        .insertInto('dcv_values')
        .values({
          customer_id: key.customerId,
          ca_brand: key.caBrand,
          csr_sha256: key.csrSha256,
          value: candidate,
          created_at: now,
          expires_at: now + ttlSeconds,
        })
        .onConflict((oc) => oc.columns(['customer_id', 'ca_brand', 'csr_sha256']).doNothing())
        .execute();
    }
  }

  /** The live value for the key, or undefined when there is none (nothing is created). */
  async live(
    key: { customerId: CustomerId; caBrand: string; csrSha256: string },
    now: number,
  ): Promise<string | undefined> {
    const row = await this.db.kysely
      .selectFrom('dcv_values')
      .select('value')
      .where('customer_id', '=', key.customerId)
      .where('ca_brand', '=', key.caBrand)
      .where('csr_sha256', '=', key.csrSha256)
      .where('expires_at', '>', now)
      .executeTakeFirst();
    return row?.value;
  }
}
