import type { Generated } from 'kysely';

// Row types of the CA's tables (see schema.ts), as Kysely sees them.

export interface CertificatesTable {
  id: Generated<number>;
  order_id: number | null;
  customer_id: number | null;
  issuer_id: string;
  serial: string;
  pem: string;
  chain_pem: string;
  pkcs7_pem: string;
  not_before: number;
  not_after: number;
  revoked_at: number | null;
  revocation_reason: number | null;
  created_at: number;
  /** The CA key that signed it (ca_keys.id); null for rows from before the built-in CA. */
  key_id: string | null;
  /**
   * ca_certificates ids of the chain delivered, leaf side first, root last, comma-separated. With
   * it, `chain_pem` and `pkcs7_pem` are left empty and rebuilt from the CA certificates on read.
   */
  chain_ids: string | null;
  profile: string | null;
  /** When its issuance round delivered it to its order (0009); null for one never delivered. */
  delivered_at: number | null;
}

export interface CaKeysTable {
  id: string;
  key_type: string;
  bits: number;
  spki: string;
  sealed: string;
  created_at: number;
}

export interface CaCertificatesTable {
  id: string;
  brand: string;
  role: string;
  generation: number;
  key_id: string;
  parent_id: string | null;
  der: string;
  serial: string;
  not_before: number;
  not_after: number;
  distrust_phase1: number | null;
  distrust_phase2: number | null;
  created_at: number;
}

export interface CaCrlsTable {
  key_id: string;
  number: number;
  this_update: number;
  next_update: number;
  der: string;
  /** `crlEntriesDigest` of the entries the CRL lists (0023); null for CRLs stored before. */
  entries_sha256: string | null;
}

export interface OcspResponsesTable {
  key_id: string;
  serial: string;
  hash_alg: string;
  der: string;
  next_update: number;
}
