import { randomBytes } from 'node:crypto';
import type { Principal, Scope } from '../../core/index.js';
import { parseScopes, type Clock } from '../../core/index.js';
import type { ApplicationsRepo, AuditRepo, OauthCodesRepo, TokensRepo } from '../../storage/index.js';
import { pkceMatches } from './sign-in.js';
import type { PrincipalCache } from './principal-cache.js';
import { hashSecret, newSecret, secretMatches } from './secrets.js';

/** The token family of the tokens a code gives (and their refreshes), known from the code's hash alone. */
function codeFamily(codeHash: string): string {
  return hashSecret(`family:${codeHash}`).slice(0, 32);
}

/** RFC 6749 §5.2 error codes. */
export type OAuthErrorCode =
  'invalid_request' | 'invalid_client' | 'invalid_grant' | 'unsupported_grant_type' | 'invalid_scope';

/** A token-endpoint failure; rendered as `{error, error_description}` (not the REST envelope). */
export class OAuthProblem extends Error {
  constructor(
    readonly code: OAuthErrorCode,
    description: string,
  ) {
    super(description);
    this.name = 'OAuthProblem';
  }
  /** HTTP status per RFC 6749: 401 for client authentication failures, else 400. */
  get status(): number {
    return this.code === 'invalid_client' ? 401 : 400;
  }
}

export interface TokenRequest {
  readonly grantType?: string;
  readonly clientId?: string;
  readonly clientSecret?: string;
  readonly scope?: string;
  readonly refreshToken?: string;
  readonly code?: string;
  readonly redirectUri?: string;
  readonly codeVerifier?: string;
}

export interface TokenResponse {
  readonly access_token: string;
  readonly token_type: 'Bearer';
  readonly expires_in: number;
  readonly refresh_token: string;
  readonly scope: string;
}

export interface OAuthDeps {
  readonly applications: ApplicationsRepo;
  readonly tokens: TokensRepo;
  readonly codes: Pick<OauthCodesRepo, 'redeem' | 'usedBy'>;
  readonly audit: AuditRepo;
  readonly clock: Clock;
  readonly accessTtl: number;
  readonly refreshTtl: number;
  readonly principals: PrincipalCache;
  /** Wall clock in milliseconds for the cache (the domain clock counts whole seconds). */
  readonly nowMs?: () => number;
}

/** OAuth2 grants, token revocation (RFC 7009) and bearer-token authentication. */
export class OAuth {
  constructor(private readonly deps: OAuthDeps) {}

  /**
   * Runs a grant (`client_credentials`, `refresh_token` or `authorization_code`). Returns the new
   * token pair; throws OAuthProblem for every client or grant fault. A refresh token is single-use:
   * it is consumed and replaced (rotation), and a reused one revokes its whole family. A code is
   * single-use too; tokens minted from one act for the person who consented (`UI`).
   */
  async token(req: TokenRequest, clientAddress: string | null): Promise<TokenResponse> {
    if (req.grantType === undefined || req.grantType === '')
      throw new OAuthProblem('invalid_request', 'grant_type is required');
    if (!['client_credentials', 'refresh_token', 'authorization_code'].includes(req.grantType)) {
      throw new OAuthProblem('unsupported_grant_type', `grant_type ${req.grantType} is not supported`);
    }
    const now = this.deps.clock.nowSeconds();
    // A public client (no secret) may redeem a code issued under a PKCE challenge (RFC 7636).
    const publicCode =
      req.grantType === 'authorization_code' && (req.clientSecret === undefined || req.clientSecret === '');
    const app = publicCode
      ? await this.publicClient(req.clientId)
      : await this.authenticateClient(req.clientId, req.clientSecret);
    let granted: readonly Scope[] = app.scopes;
    let family = randomBytes(16).toString('hex');
    let userId = app.userId;
    let authType: 'API' | 'UI' = 'API';

    if (req.grantType === 'authorization_code') {
      const codeHash = req.code === undefined || req.code === '' ? undefined : hashSecret(req.code);
      const code = codeHash === undefined ? undefined : await this.deps.codes.redeem(codeHash, now);
      // A code presented again may have been stolen: the tokens it gave are revoked (RFC 6749 §4.1.2).
      if (code === undefined && codeHash !== undefined && (await this.deps.codes.usedBy(codeHash)) === app.id)
        if ((await this.deps.tokens.revokeFamily(codeFamily(codeHash), now)) > 0) await this.deps.principals.clear();
      // The code's customer is the application's: sign-in refuses consent across accounts, and a
      // code made otherwise (or before that check) gives nothing.
      if (code === undefined || code.applicationId !== app.id || code.customerId !== app.customerId)
        throw new OAuthProblem('invalid_grant', "the code is invalid, expired, already used or not this client's");
      // RFC 6749 §4.1.3: required where the request had to name it (the application registers several).
      if (req.redirectUri === undefined ? app.redirectUris.length > 1 : req.redirectUri !== code.redirectUri)
        throw new OAuthProblem('invalid_grant', 'redirect_uri is not the one the code was issued for');
      if (code.codeChallenge !== null ? !pkceMatches(req.codeVerifier, code.codeChallenge) : publicCode)
        throw new OAuthProblem('invalid_grant', 'code_verifier does not match the code_challenge (RFC 7636)');
      family = codeFamily(codeHash!);
      granted = code.scopes.filter((s) => app.scopes.includes(s));
      userId = code.userId;
      authType = 'UI';
    }

    if (req.grantType === 'refresh_token') {
      if (req.refreshToken === undefined || req.refreshToken === '')
        throw new OAuthProblem('invalid_request', 'refresh_token is required');
      const hash = hashSecret(req.refreshToken);
      const stored = await this.deps.tokens.findLive(hash, now);
      if (stored === undefined || stored.kind !== 'refresh' || stored.applicationId !== app.id) {
        // A revoked refresh token presented again may have been stolen: end its family.
        if ((await this.deps.tokens.revokeFamilyOf(hash, now, app.id)) > 0) await this.deps.principals.clear();
        throw new OAuthProblem('invalid_grant', 'the refresh token is invalid, expired or revoked');
      }
      if (!(await this.deps.tokens.revokeOne(hash, now)))
        throw new OAuthProblem('invalid_grant', 'the refresh token was already used');
      // The refreshed grant never widens: at most the original grant's scopes, still allowed to the app.
      granted = stored.scopes.filter((s) => app.scopes.includes(s));
      family = stored.family;
      userId = stored.userId;
      authType = stored.authType;
    }

    if (req.scope !== undefined && req.scope.trim() !== '') {
      const { scopes, unknown } = parseScopes(req.scope);
      const notAllowed = scopes.filter((s) => !granted.includes(s));
      if (unknown.length > 0 || notAllowed.length > 0) {
        throw new OAuthProblem(
          'invalid_scope',
          `scope not allowed for this client: ${[...unknown, ...notAllowed].join(' ')}`,
        );
      }
      granted = scopes;
    }
    if (granted.length === 0) throw new OAuthProblem('invalid_scope', 'no scope left to grant');

    const access = newSecret('cda_');
    const refresh = newSecret('cdr_');
    const common = {
      family,
      applicationId: app.id,
      userId,
      customerId: app.customerId,
      scopes: granted,
      authType,
    };
    await this.deps.tokens.insert(
      [
        { ...common, hash: hashSecret(access), kind: 'access', expiresAt: now + this.deps.accessTtl },
        { ...common, hash: hashSecret(refresh), kind: 'refresh', expiresAt: now + this.deps.refreshTtl },
      ],
      now,
    );
    await this.deps.audit.append({
      at: now,
      customerId: app.customerId,
      actor: `app:${app.clientId}`,
      clientAddress,
      action: `token.${req.grantType}`,
      subject: `user:${userId}`,
      details: { scope: granted.join(' ') },
    });
    return {
      access_token: access,
      token_type: 'Bearer',
      expires_in: this.deps.accessTtl,
      refresh_token: refresh,
      scope: granted.join(' '),
    };
  }

  /**
   * RFC 7009 revocation: revokes the token (and its family) if the authenticated client owns
   * it. Unknown tokens are not an error (§2.2). Throws OAuthProblem only for client faults.
   */
  async revoke(
    req: { token?: string; clientId?: string; clientSecret?: string },
    clientAddress: string | null,
  ): Promise<void> {
    const app = await this.authenticateClient(req.clientId, req.clientSecret);
    if (req.token === undefined || req.token === '') throw new OAuthProblem('invalid_request', 'token is required');
    const now = this.deps.clock.nowSeconds();
    const n = await this.deps.tokens.revokeFamilyOf(hashSecret(req.token), now, app.id);
    if (n > 0) {
      await this.deps.principals.clear();
      await this.deps.audit.append({
        at: now,
        customerId: app.customerId,
        actor: `app:${app.clientId}`,
        clientAddress,
        action: 'token.revoked',
        subject: null,
      });
    }
  }

  /**
   * The principal behind a bearer token, or undefined when it is unknown, expired or revoked.
   * Served from the principal cache when it can be (see PrincipalCache for the staleness bound).
   */
  async authenticate(bearer: string): Promise<Principal | undefined> {
    const cached = this.knownPrincipal(bearer);
    if (cached !== undefined) return cached;
    const nowSeconds = this.deps.clock.nowSeconds();
    const nowMs = Math.max(this.deps.nowMs?.() ?? Date.now(), nowSeconds * 1000);
    const epoch = this.deps.principals.epoch;
    const stored = await this.deps.tokens.findLive(hashSecret(bearer), nowSeconds);
    if (stored?.kind !== 'access') return undefined;
    this.deps.principals.set(bearer, stored, nowMs, epoch);
    return stored;
  }

  /**
   * `authenticate`'s answer when the principal cache holds it, at once (no promise: the request
   * hook takes this path on almost every call); undefined means ask `authenticate`.
   */
  knownPrincipal(bearer: string): Principal | undefined {
    const nowSeconds = this.deps.clock.nowSeconds();
    const nowMs = Math.max(this.deps.nowMs?.() ?? Date.now(), nowSeconds * 1000);
    const cached = this.deps.principals.get(bearer, nowMs);
    return cached !== undefined && cached.expiresAt > nowSeconds ? cached : undefined;
  }

  /** A client that authenticates with no secret: known, not revoked, its owner active. */
  private async publicClient(clientId: string | undefined) {
    const app =
      clientId === undefined || clientId === '' ? undefined : await this.deps.applications.byClientId(clientId);
    if (app === undefined || app.revoked || !app.ownerActive)
      throw new OAuthProblem('invalid_client', 'client authentication failed');
    return app;
  }

  private async authenticateClient(clientId: string | undefined, secret: string | undefined) {
    if (clientId === undefined || clientId === '' || secret === undefined || secret === '') {
      throw new OAuthProblem('invalid_client', 'client_id and client_secret are required');
    }
    const app = await this.deps.applications.byClientId(clientId);
    // Same answer for an unknown client and a wrong secret: nothing to learn from the difference.
    if (app === undefined || app.revoked || !app.ownerActive || !secretMatches(secret, app.secretHash)) {
      throw new OAuthProblem('invalid_client', 'client authentication failed');
    }
    return app;
  }
}
