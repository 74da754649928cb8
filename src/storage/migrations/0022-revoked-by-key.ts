import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * A CRL is made from the revoked leaves of one signing key (`CaRepo.revokedOf`: `key_id`,
 * `revoked_at IS NOT NULL`). The index of 0001 on (issuer_id, revoked_at) served no query (none
 * filters on issuer_id) and took an entry for every certificate signed, while the CRL read the
 * whole table. This one holds revoked certificates only: nothing is written to it when a
 * certificate is signed, and a CRL reads its own key's entries, in revocation order.
 */
export function revokedByKey(_dialect: Dialect) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema.dropIndex('certificates_issuer_revoked').execute();
      await db.schema
        .createIndex('certificates_revoked_by_key')
        .on('certificates')
        .columns(['key_id', 'revoked_at'])
        .where(sql.ref('revoked_at'), 'is not', null)
        .execute();
    },
  };
}
