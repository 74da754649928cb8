import { sql, type Insertable, type Selectable } from 'kysely';
import { rowsInsert, writeLater, type Db } from './database.js';
import type { CaCertificatesTable, CaKeysTable, CertificatesTable } from './schema.js';

export type CaKeyRow = Selectable<CaKeysTable>;
export type CaCertificateRow = Selectable<CaCertificatesTable>;
/** RFC 5280 CRLReason superseded: a leaf recorded under a lost claim was replaced by the new holder's. */
const SUPERSEDED = 4;

export type NewLeaf = Omit<Insertable<CertificatesTable>, 'id' | 'revoked_at' | 'revocation_reason'>;

/** Every column of a leaf's row but its id (recordLeavesUnderClaims names them all: what a row lacks is NULL). */
const LEAF_COLUMNS = [
  'order_id',
  'customer_id',
  'issuer_id',
  'key_id',
  'serial',
  'pem',
  'chain_pem',
  'pkcs7_pem',
  'not_before',
  'not_after',
  'revoked_at',
  'revocation_reason',
  'created_at',
  'chain_ids',
  'profile',
  'delivered_at',
] as const satisfies readonly (keyof CertificatesTable)[];

/** What OCSP and revocation need to know about one leaf. */
export interface LeafStatus {
  readonly id: number;
  readonly keyId: string | null;
  readonly issuerId: string;
  readonly serial: string;
  readonly orderId: number | null;
  readonly customerId: number | null;
  readonly notAfter: number;
  readonly revokedAt: number | null;
  readonly reason: number | null;
}

export interface RevokedEntry {
  readonly serial: string;
  readonly revokedAt: number;
  readonly reason: number | null;
}

/** A signed CRL as stored: one per issuing key. */
export interface StoredCrl {
  readonly number: number;
  readonly thisUpdate: number;
  readonly nextUpdate: number;
  /** Base64 DER. */
  readonly der: string;
  /** A digest of the entries it lists (see `crlEntriesDigest` in the CA); null when stored before it was kept. */
  readonly entriesDigest: string | null;
}

/** RFC 5280 §5.3.1 CRLReason keyCompromise. */
const KEY_COMPROMISE = 1;

const leafColumns = [
  'id',
  'key_id',
  'issuer_id',
  'serial',
  'order_id',
  'customer_id',
  'not_after',
  'revoked_at',
  'revocation_reason',
] as const;
type LeafRow = Pick<Selectable<CertificatesTable>, (typeof leafColumns)[number]>;
const toStatus = (r: LeafRow): LeafStatus => ({
  id: r.id,
  keyId: r.key_id,
  issuerId: r.issuer_id,
  serial: r.serial,
  orderId: r.order_id,
  customerId: r.customer_id,
  notAfter: r.not_after,
  revokedAt: r.revoked_at,
  reason: r.revocation_reason,
});

/**
 * The built-in CA's records: sealed keys, CA certificates, issued leaves and their revocation,
 * the current CRL per issuing key and the cache of signed OCSP responses. Serials are upper-case
 * hex without leading zeros' ambiguity: exactly the bytes in the certificate.
 */
export class CaRepo {
  constructor(private readonly db: Db) {}

  async insertKey(row: CaKeyRow): Promise<void> {
    await this.db.kysely.insertInto('ca_keys').values(row).execute();
  }

  listKeys(): Promise<CaKeyRow[]> {
    return this.db.kysely.selectFrom('ca_keys').selectAll().orderBy('id').execute();
  }

  async insertCaCertificate(row: CaCertificateRow): Promise<void> {
    await this.db.kysely.insertInto('ca_certificates').values(row).execute();
  }

  listCaCertificates(): Promise<CaCertificateRow[]> {
    return this.db.kysely
      .selectFrom('ca_certificates')
      .selectAll()
      .orderBy('brand')
      .orderBy('generation')
      .orderBy('id')
      .execute();
  }

  /** Each CA certificate's id and distrust dates: what tells a loaded hierarchy from the stored one. */
  caCertificateStates(): Promise<Pick<CaCertificateRow, 'id' | 'distrust_phase1' | 'distrust_phase2'>[]> {
    return this.db.kysely.selectFrom('ca_certificates').select(['id', 'distrust_phase1', 'distrust_phase2']).execute();
  }

  /** Marks a CA certificate distrusted from the given dates; false when there is no such id. */
  async setDistrust(id: string, phase1: number | null, phase2: number | null): Promise<boolean> {
    const r = await this.db.kysely
      .updateTable('ca_certificates')
      .set({ distrust_phase1: phase1, distrust_phase2: phase2 })
      .where('id', '=', id)
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  /**
   * The issuance claims the given orders hold now, locked until the caller's transaction ends, so
   * that a claim checked here cannot change hands before the certificates signed under it are
   * recorded. PostgreSQL: the rows locked as an UPDATE of them would (FOR NO KEY UPDATE, in id
   * order), without writing a new version of each (an order's row is kilobytes of WAL, and a
   * version bump by its trigger). SQLite: a write (an UPDATE that changes nothing) rather than a
   * read, so that it takes its write lock at once instead of failing to upgrade a read snapshot
   * that another writer outdated.
   */
  async lockIssuanceClaims(orderIds: readonly number[]): Promise<Map<number, string | null>> {
    if (orderIds.length === 0) return new Map();
    const ids = [...new Set(orderIds)];
    const rows =
      this.db.dialect === 'postgres'
        ? await this.db.kysely
            .selectFrom('orders')
            .select(['id', 'issuance_claim'])
            .where('id', 'in', ids)
            .orderBy('id')
            .forNoKeyUpdate()
            .execute()
        : await this.db.kysely
            .updateTable('orders')
            .set((eb) => ({ issuance_claim: eb.ref('issuance_claim') }))
            .where('id', 'in', ids)
            .returning(['id', 'issuance_claim'])
            .execute();
    return new Map(rows.map((r) => [r.id, r.issuance_claim]));
  }

  /**
   * Records signed leaves, each signed for an order under an issuance claim (or outside any: CLI
   * signing, `claim` undefined), in the caller's transaction. A leaf whose claim is no longer held
   * when it is written is recorded revoked (superseded, at `revokedAt`) so that no signature goes
   * unrecorded, and is reported lost: its signer must not deliver it. Returns, per item, whether
   * its claim was lost. The one fence every issuer's certificates pass, whoever records them.
   */
  async recordLeavesUnderClaims(
    items: readonly { leaf: NewLeaf; claim?: string | undefined }[],
    revokedAt: number,
  ): Promise<boolean[]> {
    const fenced = items
      .filter((i) => i.claim !== undefined && i.leaf.order_id !== null && i.leaf.order_id !== undefined)
      .map((i) => i.leaf.order_id!);
    const held = await this.lockIssuanceClaims(fenced);
    const lost = items.map((i) => i.claim !== undefined && held.get(i.leaf.order_id ?? -1) !== i.claim);
    const rows = items.map((i, k) =>
      lost[k] ? { ...i.leaf, revoked_at: revokedAt, revocation_reason: SUPERSEDED } : i.leaf,
    );
    // Read back by nobody in the transaction: on PostgreSQL it goes with the commit (`writeLater`).
    if (rows.length > 0)
      await writeLater(this.db, 'certificates', rowsInsert(this.db, 'certificates', LEAF_COLUMNS, rows));
    return lost;
  }

  async leaf(keyId: string, serial: string): Promise<LeafStatus | undefined> {
    const r = await this.db.kysely
      .selectFrom('certificates')
      .select(leafColumns)
      .where('key_id', '=', keyId)
      .where('serial', '=', serial)
      .executeTakeFirst();
    return r === undefined ? undefined : toStatus(r);
  }

  async leafBySerial(serial: string): Promise<LeafStatus | undefined> {
    const r = await this.db.kysely
      .selectFrom('certificates')
      .select(leafColumns)
      .where('serial', '=', serial)
      .executeTakeFirst();
    return r === undefined ? undefined : toStatus(r);
  }

  /** The stored certificate of one leaf, for callers that show it again. */
  async leafRecord(serial: string): Promise<
    | {
        serial: string;
        keyId: string | null;
        pem: string;
        chainPem: string;
        pkcs7Pem: string;
        chainIds: string | null;
        notBefore: number;
        notAfter: number;
      }
    | undefined
  > {
    const r = await this.db.kysely
      .selectFrom('certificates')
      .select(['serial', 'key_id', 'pem', 'chain_pem', 'pkcs7_pem', 'chain_ids', 'not_before', 'not_after'])
      .where('serial', '=', serial)
      .executeTakeFirst();
    return r === undefined
      ? undefined
      : {
          serial: r.serial,
          keyId: r.key_id,
          pem: r.pem,
          chainPem: r.chain_pem,
          pkcs7Pem: r.pkcs7_pem,
          chainIds: r.chain_ids,
          notBefore: r.not_before,
          notAfter: r.not_after,
        };
  }

  /**
   * Revokes a leaf once: the guarded update succeeds only if it was not revoked yet, so two
   * concurrent revocations record one time and one reason. True when this call revoked it.
   */
  async revoke(id: number, at: number, reason: number | null): Promise<boolean> {
    const r = await this.db.kysely
      .updateTable('certificates')
      .set({ revoked_at: at, revocation_reason: reason })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  /**
   * Changes the reason of a revoked leaf to keyCompromise (RFC 5280 CRLReason 1), keeping its
   * revocation time. Guarded: only a revoked leaf whose reason is another one (or none) changes, so
   * of two concurrent escalations one records it. True when this call changed the reason.
   */
  async escalateToKeyCompromise(id: number): Promise<boolean> {
    const r = await this.db.kysely
      .updateTable('certificates')
      .set({ revocation_reason: KEY_COMPROMISE })
      .where('id', '=', id)
      .where('revoked_at', 'is not', null)
      // NULL (no reasonCode: unspecified) never compares unequal in SQL: name it.
      .where((eb) => eb.or([eb('revocation_reason', 'is', null), eb('revocation_reason', '<>', KEY_COMPROMISE)]))
      .executeTakeFirst();
    return r.numUpdatedRows > 0n;
  }

  /** Revoked leaves of a key that have not expired by `now` (expired ones may leave the CRL). */
  async revokedOf(keyId: string, now: number): Promise<RevokedEntry[]> {
    const rows = await this.db.kysely
      .selectFrom('certificates')
      .select(['serial', 'revoked_at', 'revocation_reason'])
      .where('key_id', '=', keyId)
      .where('revoked_at', 'is not', null)
      .where('not_after', '>=', now)
      .orderBy('revoked_at')
      .orderBy('serial')
      .execute();
    return rows.map((r) => ({ serial: r.serial, revokedAt: r.revoked_at ?? 0, reason: r.revocation_reason }));
  }

  async crl(keyId: string): Promise<StoredCrl | undefined> {
    const r = await this.db.kysely.selectFrom('ca_crls').selectAll().where('key_id', '=', keyId).executeTakeFirst();
    return r === undefined
      ? undefined
      : {
          number: r.number,
          thisUpdate: r.this_update,
          nextUpdate: r.next_update,
          der: r.der,
          entriesDigest: r.entries_sha256,
        };
  }

  /** Stores a CRL unless one with the same or a higher number is already there. */
  async saveCrl(keyId: string, crl: StoredCrl): Promise<boolean> {
    const row = {
      key_id: keyId,
      number: crl.number,
      this_update: crl.thisUpdate,
      next_update: crl.nextUpdate,
      der: crl.der,
      entries_sha256: crl.entriesDigest,
    };
    const r = await this.db.kysely
      .insertInto('ca_crls')
      .values(row)
      .onConflict((oc) =>
        oc
          .column('key_id')
          .doUpdateSet({
            number: crl.number,
            this_update: crl.thisUpdate,
            next_update: crl.nextUpdate,
            der: crl.der,
            entries_sha256: crl.entriesDigest,
          })
          .where('ca_crls.number', '<', crl.number),
      )
      .executeTakeFirst();
    return (r.numInsertedOrUpdatedRows ?? 0n) > 0n;
  }

  async ocspResponse(
    keyId: string,
    serial: string,
    hashAlg: string,
  ): Promise<{ der: string; nextUpdate: number } | undefined> {
    const r = await this.db.kysely
      .selectFrom('ocsp_responses')
      .select(['der', 'next_update'])
      .where('key_id', '=', keyId)
      .where('serial', '=', serial)
      .where('hash_alg', '=', hashAlg)
      .executeTakeFirst();
    return r === undefined ? undefined : { der: r.der, nextUpdate: r.next_update };
  }

  /**
   * Stores a signed OCSP response for a leaf, only while the leaf's revocation state is still the
   * one it was built from (`basis`): a revocation (or a reason raised to keyCompromise) committed
   * between the read and this write would otherwise find nothing to drop and leave a stale answer
   * stored for days. On PostgreSQL the check locks the leaf's row (FOR SHARE), so a revocation in
   * progress is waited for and then seen; SQLite has one writer at a time.
   */
  async saveOcspResponse(
    keyId: string,
    serial: string,
    hashAlg: string,
    der: string,
    nextUpdate: number,
    basis: { readonly revokedAt: number | null; readonly reason: number | null },
  ): Promise<void> {
    const lock = this.db.dialect === 'postgres' ? sql` for share` : sql``;
    await sql`insert into ocsp_responses (key_id, serial, hash_alg, der, next_update)
      select ${keyId}, ${serial}, ${hashAlg}, ${der}, cast(${nextUpdate} as bigint)
      where exists (
        select 1 from certificates
        where key_id = ${keyId} and serial = ${serial}
          and revoked_at is not distinct from cast(${basis.revokedAt} as bigint)
          and revocation_reason is not distinct from cast(${basis.reason} as integer)${lock}
      )
      on conflict (key_id, serial, hash_alg) do update set der = excluded.der, next_update = excluded.next_update`.execute(
      this.db.kysely,
    );
  }

  /** Drops the cached responses of a serial (its status changed). */
  async dropOcspResponses(keyId: string, serial: string): Promise<void> {
    await this.db.kysely
      .deleteFrom('ocsp_responses')
      .where('key_id', '=', keyId)
      .where('serial', '=', serial)
      .execute();
  }
}
