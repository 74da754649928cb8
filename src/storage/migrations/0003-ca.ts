import type { Kysely } from 'kysely';
import type { Dialect } from '../database.js';

/**
 * The built-in CA (DESIGN §5.7): sealed CA keys, the CA certificates of each brand's hierarchy,
 * the latest CRL of each issuing CA, and the cache of signed OCSP responses. Leaf certificates
 * stay in `certificates` (0001), which gains the key identity OCSP needs and the chain it was
 * delivered with.
 */
export function ca(_dialect: Dialect) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .createTable('ca_keys')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('key_type', 'text', (c) => c.notNull())
        .addColumn('bits', 'integer', (c) => c.notNull())
        // SubjectPublicKeyInfo, base64 DER.
        .addColumn('spki', 'text', (c) => c.notNull())
        // PKCS#8 private key sealed with AES-256-GCM under the key file: base64(iv | tag | ciphertext).
        .addColumn('sealed', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('ca_certificates')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('brand', 'text', (c) => c.notNull())
        // rsa-root, ecc-root, legacy-root, rsa-int, ecc-int, ecc-int-x, rsa-int-legacy, codesign-int, smime-int.
        .addColumn('role', 'text', (c) => c.notNull())
        .addColumn('generation', 'integer', (c) => c.notNull())
        .addColumn('key_id', 'text', (c) => c.notNull().references('ca_keys.id'))
        // The CA certificate that signed this one; null for a self-signed root.
        .addColumn('parent_id', 'text')
        .addColumn('der', 'text', (c) => c.notNull())
        .addColumn('serial', 'text', (c) => c.notNull())
        .addColumn('not_before', 'bigint', (c) => c.notNull())
        .addColumn('not_after', 'bigint', (c) => c.notNull())
        .addColumn('distrust_phase1', 'bigint')
        .addColumn('distrust_phase2', 'bigint')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addUniqueConstraint('ca_certificates_role', ['brand', 'role', 'generation'])
        .execute();

      // The current CRL of each issuing CA key; `number` only ever grows.
      await db.schema
        .createTable('ca_crls')
        .addColumn('key_id', 'text', (c) => c.primaryKey().references('ca_keys.id'))
        .addColumn('number', 'bigint', (c) => c.notNull())
        .addColumn('this_update', 'bigint', (c) => c.notNull())
        .addColumn('next_update', 'bigint', (c) => c.notNull())
        .addColumn('der', 'text', (c) => c.notNull())
        .execute();

      // Signed OCSP responses, one per (issuing key, serial, CertID hash algorithm).
      await db.schema
        .createTable('ocsp_responses')
        .addColumn('key_id', 'text', (c) => c.notNull())
        .addColumn('serial', 'text', (c) => c.notNull())
        .addColumn('hash_alg', 'text', (c) => c.notNull())
        .addColumn('der', 'text', (c) => c.notNull())
        .addColumn('next_update', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('ocsp_responses_pk', ['key_id', 'serial', 'hash_alg'])
        .execute();

      // The signing key, the chain delivered and the profile of each leaf.
      await db.schema.alterTable('certificates').addColumn('key_id', 'text').execute();
      await db.schema.alterTable('certificates').addColumn('chain_ids', 'text').execute();
      await db.schema.alterTable('certificates').addColumn('profile', 'text').execute();
    },
  };
}
