import type { Generated } from 'kysely';
import type { VoucherStatus } from '../core/index.js';
import type {
  CaCertificatesTable,
  CaCrlsTable,
  CaKeysTable,
  CertificatesTable,
  OcspResponsesTable,
} from './schema-ca.js';
import type {
  OauthCodesTable,
  OperatorSessionsTable,
  OperatorsTable,
  RecoveryCodesTable,
  SignInFailuresTable,
  WebSessionsTable,
} from './schema-sign-in.js';

export type * from './schema-ca.js';
export type * from './schema-sign-in.js';

// Row types of every table, as Kysely sees them. Times are whole UTC seconds, money integer
// minor units, booleans 0/1, lists and nested request data JSON text. Migrations create these.

export interface CustomersTable {
  id: Generated<number>;
  name: string;
  email: string;
  currency: string;
  credit_limit_minor: number;
  used_minor: Generated<number>;
  country: string;
  locale: string;
  timezone: string;
  created_at: number;
  updated_at: number;
  /** The least length of the customer's users' passwords. */
  password_min_length: Generated<number>;
  /** 1: every user must sign in with a second factor. */
  require_two_factor: Generated<number>;
  /** When an operator suspended the customer (its tokens and sign-ins refused); null when not suspended. */
  suspended_at: number | null;
}

export interface UsersTable {
  id: Generated<number>;
  customer_id: number;
  username: string;
  full_name: string;
  email: string;
  mobile: string | null;
  password_hash: string;
  /** Comma-separated role names. */
  roles: string;
  active: number;
  timezone: string | null;
  locale: string | null;
  special_product_availability: Generated<number>;
  two_factor_enabled: Generated<number>;
  created_at: number;
  updated_at: number;
  password_changed_at: number;
  deleted_at: number | null;
  /** Base32 TOTP secret once enrolment was verified; the one being enrolled in totp_pending. */
  totp_secret: string | null;
  totp_pending: string | null;
  /** The last TOTP time step accepted: a code is good once. */
  totp_last_step: number | null;
}

export interface ApiApplicationsTable {
  id: Generated<number>;
  customer_id: number;
  user_id: number;
  name: string;
  client_id: string;
  /** SHA-256 (hex) of the client secret: 256 random bits need no slow hash. */
  secret_hash: string;
  /** Space-separated scopes the application may ask for. */
  scopes: string;
  created_at: number;
  revoked_at: number | null;
  /** Space-separated redirect URIs registered for the authorization_code flow (matched exactly). */
  redirect_uris: Generated<string>;
}

export interface OauthTokensTable {
  id: Generated<number>;
  token_hash: string;
  kind: 'access' | 'refresh';
  /** Random id shared by the tokens of one grant, so a refresh chain can be revoked whole. */
  family: string;
  application_id: number | null;
  user_id: number;
  customer_id: number;
  scopes: string;
  auth_type: 'API' | 'UI';
  expires_at: number;
  created_at: number;
  revoked_at: number | null;
}

export interface OrdersTable {
  id: Generated<number>;
  customer_id: number;
  partner_order_id: string;
  /** SHA-256 of the canonical request, so a retried POST can be told from a different one. */
  request_hash: string;
  product_code: string;
  /** The product as sold (JSON of core `Product`); null for orders placed before 0016. */
  product_json: string | null;
  product_type: string;
  ca_brand: string;
  validation_level: string | null;
  common_name: string;
  major_status: string;
  minor_status: string;
  dv_auth_method: string | null;
  signature_hash_algorithm: string;
  validity_period: number;
  server_count: number;
  /** JSON array of the SAN host names. */
  san_names: string;
  params_json: string;
  contacts_json: string;
  organization_json: string | null;
  csr_pem: string | null;
  csr_sha256: string | null;
  price_minor: number;
  currency: string;
  billing_status: string;
  order_date: number;
  update_date: number;
  issued_at: number | null;
  term_end: number | null;
  failure_reason: string | null;
  /** The DCV value the order was placed with (0004), or of its current reissue. */
  dcv_value: string | null;
  /** When the current reissue round started (0008); null before any reissue. */
  reissued_at: number | null;
  /** certificates.id of the newest certificate when that round started (0008). */
  reissue_base_cert: number | null;
  /** EndDate of the current certificate (0008). */
  cert_not_after: number | null;
  /** Who holds the right to sign this order's current issuance round (0009); null when nobody does. */
  issuance_claim: string | null;
  /** When that claim lapses if its holder disappears without a trace (0009). */
  issuance_claim_until: number | null;
  /** Idempotency-Key of the DELETE /Order that cancelled the order (0010); null without one. */
  cancel_key: string | null;
  /** What that cancel answered: 1 refunded, 0 charged (0010); null when not cancelled with a key. */
  cancel_refunded: number | null;
  /** Goes up by one with every update of the row, by trigger (0021): GET /Order's change tag. */
  version: Generated<number>;
}

/**
 * How many orders a customer has per MajorStatus and ProductType (0020), kept by triggers on
 * `orders`. Add `order_count_deltas` of the same key for the exact count (PostgreSQL only).
 */
export interface OrderCountsTable {
  customer_id: number;
  major_status: string;
  product_type: string;
  n: number;
}

/** Changes to `order_counts` not folded in yet (0020, PostgreSQL only: SQLite's triggers add directly). */
export interface OrderCountDeltasTable {
  id: Generated<number>;
  customer_id: number;
  major_status: string;
  product_type: string;
  /** How much the count of the key changes. */
  n: number;
}

export interface OrderNamesTable {
  id: Generated<number>;
  order_id: number;
  name: string;
  method: string;
  status: string;
  approver_email: string | null;
  validated_at: number | null;
  last_checked_at: number | null;
  last_problem: string | null;
  /** SHA-256 (hex) of the EMAIL approval link's token (0006). */
  approval_token_hash: string | null;
  /** Goes up by one with every update of the row, by trigger (0021). */
  version: Generated<number>;
}

export interface DcvValuesTable {
  customer_id: number;
  ca_brand: string;
  csr_sha256: string;
  value: string;
  created_at: number;
  expires_at: number;
}

export interface LedgerTable {
  id: Generated<number>;
  customer_id: number;
  order_id: number | null;
  kind: string;
  amount_minor: number;
  created_at: number;
}

export interface JobsTable {
  id: Generated<number>;
  name: string;
  payload: string;
  unique_key: string | null;
  status: string;
  run_at: number;
  attempts: Generated<number>;
  lease_owner: string | null;
  lease_expires_at: number | null;
  last_error: string | null;
  created_at: number;
  updated_at: number;
}

export interface AuditEventsTable {
  id: Generated<number>;
  at: number;
  customer_id: number | null;
  actor: string;
  client_address: string | null;
  action: string;
  subject: string | null;
  details: string | null;
}

export interface DB {
  customers: CustomersTable;
  users: UsersTable;
  api_applications: ApiApplicationsTable;
  oauth_tokens: OauthTokensTable;
  orders: OrdersTable;
  order_counts: OrderCountsTable;
  order_count_deltas: OrderCountDeltasTable;
  order_names: OrderNamesTable;
  dcv_values: DcvValuesTable;
  certificates: CertificatesTable;
  ledger: LedgerTable;
  jobs: JobsTable;
  audit_events: AuditEventsTable;
  kv_keys: KvKeysTable;
  kv_entries: KvEntriesTable;
  ca_keys: CaKeysTable;
  ca_certificates: CaCertificatesTable;
  ca_crls: CaCrlsTable;
  ocsp_responses: OcspResponsesTable;
  mail_outbox: MailOutboxTable;
  web_sessions: WebSessionsTable;
  oauth_codes: OauthCodesTable;
  recovery_codes: RecoveryCodesTable;
  sign_in_failures: SignInFailuresTable;
  vouchers: VouchersTable;
  vulnerability_assessments: VulnerabilityAssessmentsTable;
  scan_reports: ScanReportsTable;
  operators: OperatorsTable;
  operator_sessions: OperatorSessionsTable;
}

export interface KvKeysTable {
  id: Generated<number>;
  customer_id: number;
  /** SHA-256 (hex) of the hash-store key: the key itself is shown once and never stored. */
  key_hash: string;
  label: string;
  created_at: number;
  revoked_at: number | null;
}

export interface KvEntriesTable {
  customer_id: number;
  /** Lower-cased host name the hash was filed for. */
  name: string;
  hash: string;
  updated_at: number;
}

/**
 * `outbox` recorded (its delivery queued when SMTP is configured), `sent`, `failed` (the last try
 * failed), `withdrawn` (never sent: what it carried was replaced, e.g. an approval link voided).
 */
export type MailStatus = 'sent' | 'outbox' | 'failed' | 'withdrawn';

/** Row type of `mail_outbox` (migration 0005-mail), as Kysely sees it. */
export interface MailOutboxTable {
  id: Generated<number>;
  customer_id: number | null;
  order_id: number | null;
  to_address: string;
  subject: string;
  body_text: string;
  /** What the mail is about, e.g. 'dcv.approval'. */
  kind: string;
  status: MailStatus;
  /** Why the last send failed; null unless status is 'failed'. */
  error: string | null;
  created_at: number;
  sent_at: number | null;
}

export interface VouchersTable {
  id: Generated<number>;
  customer_id: number;
  /** SHA-256 (hex) of the normalized code: how a code is looked up. */
  code_hash: string;
  /** The code sealed (AES-256-GCM) for its owner's listings. */
  code_sealed: string;
  partner_order_id: string;
  product_code: string;
  /** The product as sold (JSON of core `Product`): redemption honours it whatever the catalog says now. */
  product: string;
  server_count: number;
  /** Non-wildcard SAN hosts paid for. */
  san_count: number;
  validity_period: number;
  /** The reserved price, in minor units of `currency`. */
  price_minor: number;
  currency: string;
  status: VoucherStatus;
  created_at: number;
  /** The audit name of who created it (`user:<id>` or `app:<client id>`). */
  created_by: string;
  voided_at: number | null;
  redeemed_at: number | null;
  /** The order the redemption created. */
  order_id: number | null;
}

export interface VulnerabilityAssessmentsTable {
  order_id: number;
  customer_id: number;
  /** `Active` or `Inactive` (spec §4.22 ServiceStatus). */
  status: string;
  /** `NONE`, `NEW_REPORT` or `CRITICAL` (spec §4.22 EmailNotificationLevel). */
  notification_level: string;
  created_at: number;
  updated_at: number;
  /** The last on-demand rescan (GET /VulnerabilityAssessmentRescan): at most one an hour. */
  last_rescan_at: number | null;
}

export interface ScanReportsTable {
  id: Generated<number>;
  order_id: number;
  customer_id: number;
  /** `vulnerability` (weekly or on demand) or `configuration` (after issuance). */
  kind: string;
  /** When the scan ran. */
  created_at: number;
  engine: string;
  criteria_version: string;
  /** The order's grade (its worst name's); null when no name could be scanned. */
  grade: string | null;
  /** JSON array of the ids of the critical findings. */
  critical: string;
  /** The whole report (JSON of the RA's ScanReport). */
  report: string;
}
