import type { Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * `ca_crls.entries_sha256`: a digest of the revoked entries a stored CRL was built from
 * (`crlEntriesDigest`). A revocation commits before its CRL is re-signed; should the process die
 * (or the signing fail) in between, the stored CRL lacks the entry until it falls due. The
 * periodic refresh compares this digest with the entries the CRL would list now and re-signs a
 * CRL that lags. Null for CRLs stored before: those are re-signed once.
 */
export function crlEntriesDigest(_dialect: Dialect) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema.alterTable('ca_crls').addColumn('entries_sha256', 'text').execute();
    },
  };
}
