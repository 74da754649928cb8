import type { Generated } from 'kysely';

// Row types of the sign-in tables: web and operator sessions, sign-in failures, recovery codes,
// OAuth authorization codes, operators (see schema.ts), as Kysely sees them.

export interface WebSessionsTable {
  id: Generated<number>;
  /** SHA-256 (hex) of the session cookie. */
  token_hash: string;
  user_id: number;
  customer_id: number;
  /** The CSRF token the session's forms carry. */
  csrf: string;
  created_at: number;
  expires_at: number;
  revoked_at: number | null;
  /** 1 while the session is past the password but not yet past the second factor. */
  second_factor_pending: Generated<number>;
}

export interface SignInFailuresTable {
  /** `u:<username>` or `a:<client address>`. */
  key: string;
  failures: number;
  blocked_until: number;
  updated_at: number;
}

export interface RecoveryCodesTable {
  id: Generated<number>;
  user_id: number;
  /** SHA-256 (hex) of the recovery code. */
  code_hash: string;
  created_at: number;
  used_at: number | null;
}

export interface OauthCodesTable {
  id: Generated<number>;
  /** SHA-256 (hex) of the authorization code. */
  code_hash: string;
  application_id: number;
  user_id: number;
  customer_id: number;
  redirect_uri: string;
  /** Space-separated scopes granted. */
  scopes: string;
  /** PKCE S256 challenge (RFC 7636), or null for a code issued without one. */
  code_challenge: string | null;
  created_at: number;
  expires_at: number;
  used_at: number | null;
}

export interface OperatorsTable {
  id: Generated<number>;
  username: string;
  /** argon2id of the password. */
  password_hash: string;
  /** The TOTP seed, sealed (AES-256-GCM) for this operator; a second factor is mandatory. */
  totp_secret: string;
  /** The last TOTP time step accepted: a code is good once. */
  totp_last_step: number | null;
  created_at: number;
  disabled_at: number | null;
}

export interface OperatorSessionsTable {
  id: Generated<number>;
  /** SHA-256 (hex) of the session cookie. */
  token_hash: string;
  operator_id: number;
  /** The CSRF token the session's forms carry. */
  csrf: string;
  created_at: number;
  /** The last request: a session idle for too long ends. */
  last_seen_at: number;
  expires_at: number;
  revoked_at: number | null;
  /** 1 while the session is past the password but not yet past the TOTP code. */
  second_factor_pending: Generated<number>;
}
