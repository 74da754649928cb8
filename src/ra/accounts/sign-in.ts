import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { parseScopes, type Application, type Clock, type Scope, type User } from '../../core/index.js';
import type {
  ApplicationsRepo,
  AuditRepo,
  CustomersRepo,
  OauthCodesRepo,
  UsersRepo,
  WebSession,
  WebSessionsRepo,
} from '../../storage/index.js';
import { hashSecret, passwordMatches } from './secrets.js';
import type { SignInThrottle } from './sign-in-throttle.js';

// People sign in, and authorise applications to act for them (RFC 6749 §4.1 with PKCE, RFC
// 7636): the sign-in page makes a session; the authorization endpoint checks the request, asks
// for consent and hands out a code the application exchanges at the token endpoint.

/** How long a signed-in session lasts. */
export const SESSION_SECONDS = 8 * 3600;
/** How long an authorization code may wait for its exchange (RFC 6749 §4.1.2: at most 10 minutes; shorter is safer). */
export const CODE_SECONDS = 120;

/** A failure of GET/POST /oauth2/authorize (RFC 6749 §4.1.2.1). */
export class AuthorizeProblem extends Error {
  constructor(
    readonly code:
      'invalid_request' | 'unauthorized_client' | 'access_denied' | 'unsupported_response_type' | 'invalid_scope',
    description: string,
    /** False when the client or redirect URI cannot be trusted: the error is shown, never redirected. */
    readonly redirectable: boolean,
  ) {
    super(description);
    this.name = 'AuthorizeProblem';
  }
}

/** The query of GET /oauth2/authorize, as sent. */
export interface AuthorizeParams {
  readonly response_type?: string;
  readonly client_id?: string;
  readonly redirect_uri?: string;
  readonly scope?: string;
  readonly state?: string;
  readonly code_challenge?: string;
  readonly code_challenge_method?: string;
}

/** A checked authorization request: what the consent page shows and the code will carry. */
export interface AuthorizeRequest {
  readonly application: Application;
  readonly redirectUri: string;
  readonly scopes: readonly Scope[];
  readonly state: string | undefined;
  readonly codeChallenge: string | null;
}

/** A signed-in person: the session, the user, and whether the account requires a second factor it has not enrolled. */
export interface SignedIn {
  readonly session: WebSession;
  readonly user: User;
  readonly needsEnrolment: boolean;
}

export interface SignInDeps {
  readonly users: Pick<UsersRepo, 'credentials' | 'byId'>;
  readonly customers: Pick<CustomersRepo, 'byId'>;
  readonly webSessions: Pick<WebSessionsRepo, 'create' | 'findLive' | 'revoke'>;
  readonly applications: Pick<ApplicationsRepo, 'byClientId'>;
  readonly oauthCodes: Pick<OauthCodesRepo, 'create'>;
  readonly audit: Pick<AuditRepo, 'append'>;
  readonly clock: Clock;
  readonly throttle: Pick<SignInThrottle, 'wait' | 'failed' | 'succeeded'>;
}

/** What a sign-in attempt came to. */
export type SignInResult =
  | { readonly kind: 'signedIn'; readonly cookie: string; readonly user: User; readonly secondFactor: boolean }
  | { readonly kind: 'failed' }
  /** Too many failures for this account or address: try again after `retryAfter` seconds (nothing was checked). */
  | { readonly kind: 'throttled'; readonly retryAfter: number };

export class SignIn {
  constructor(private readonly deps: SignInDeps) {}

  /**
   * Checks a username and password. Returns the new session's cookie value (shown once; stored
   * hashed) and its user, or undefined — the same answer, in the same time, for an unknown user,
   * a wrong password and an inactive user. A user with a second factor gets a session that is good
   * for the code step only (`secondFactor`). After repeated failures of the account or the address
   * it answers `throttled` without checking anything (SignInThrottle). Every attempt is an audit event.
   */
  async signIn(username: string, password: string, clientAddress: string | null): Promise<SignInResult> {
    const retryAfter = await this.deps.throttle.wait(username, clientAddress);
    if (retryAfter > 0) return { kind: 'throttled', retryAfter };
    const now = this.deps.clock.nowSeconds();
    const found =
      username.length > 0 && username.length <= 64 ? await this.deps.users.credentials(username) : undefined;
    const ok = await passwordMatches(password.slice(0, 1024), found?.passwordHash);
    const user = ok ? found?.user : undefined;
    await this.deps.audit.append({
      at: now,
      customerId: found?.user.customerId ?? null,
      actor: user === undefined ? 'anonymous' : `user:${user.id}`,
      clientAddress,
      action: user === undefined ? 'user.sign-in-failed' : 'user.signed-in',
      subject: found === undefined ? 'user:unknown' : `user:${found.user.id}`,
    });
    if (user === undefined) {
      await this.deps.throttle.failed(username, clientAddress);
      return { kind: 'failed' };
    }
    await this.deps.throttle.succeeded(username);
    const cookie = `cdw_${randomBytes(32).toString('base64url')}`;
    await this.deps.webSessions.create(
      {
        tokenHash: hashSecret(cookie),
        userId: user.id,
        customerId: user.customerId,
        csrf: randomBytes(24).toString('base64url'),
        expiresAt: now + SESSION_SECONDS,
        secondFactorPending: user.twoFactorEnabled,
      },
      now,
    );
    return { kind: 'signedIn', cookie, user, secondFactor: user.twoFactorEnabled };
  }

  /**
   * The live, complete session of a cookie, with its user; undefined when signed out, expired,
   * the user is gone, or the second factor is still to be shown (`pendingSession`).
   */
  async session(cookie: string | undefined): Promise<SignedIn | undefined> {
    const found = await this.anySession(cookie);
    return found === undefined || found.session.secondFactorPending ? undefined : found;
  }

  /** The session of a cookie that is past the password and waits for the second factor. */
  async pendingSession(cookie: string | undefined): Promise<SignedIn | undefined> {
    const found = await this.anySession(cookie);
    return found?.session.secondFactorPending === true ? found : undefined;
  }

  private async anySession(cookie: string | undefined): Promise<SignedIn | undefined> {
    if (cookie === undefined || !/^cdw_[A-Za-z0-9_-]{40,60}$/.test(cookie)) return undefined;
    const session = await this.deps.webSessions.findLive(hashSecret(cookie), this.deps.clock.nowSeconds());
    if (session === undefined) return undefined;
    const user = await this.deps.users.byId(session.customerId, session.userId);
    if (user === undefined || !user.active) return undefined;
    const customer = await this.deps.customers.byId(user.customerId);
    return { session, user, needsEnrolment: customer?.requireTwoFactor === true && !user.twoFactorEnabled };
  }

  async signOut(cookie: string | undefined): Promise<void> {
    if (cookie !== undefined) await this.deps.webSessions.revoke(hashSecret(cookie), this.deps.clock.nowSeconds());
  }

  /**
   * Checks an authorization request (RFC 6749 §4.1.1, RFC 7636 §4.3): the client and its exactly
   * registered redirect URI first (a fault there is never redirected), then response_type, the
   * scopes (those asked for, within the application's; all of them when none are asked for) and
   * the PKCE challenge (S256 only; optional for these confidential clients). Throws AuthorizeProblem.
   */
  async checkRequest(p: AuthorizeParams): Promise<AuthorizeRequest> {
    const application = p.client_id === undefined ? undefined : await this.deps.applications.byClientId(p.client_id);
    if (application === undefined || application.revoked || !application.ownerActive)
      throw new AuthorizeProblem('unauthorized_client', 'Unknown or revoked client_id.', false);
    const redirectUri =
      p.redirect_uri ?? (application.redirectUris.length === 1 ? application.redirectUris[0] : undefined);
    if (redirectUri === undefined || !application.redirectUris.includes(redirectUri))
      throw new AuthorizeProblem(
        'invalid_request',
        'redirect_uri is not one registered for this application (they are matched exactly).',
        false,
      );
    if (p.response_type !== 'code')
      throw new AuthorizeProblem('unsupported_response_type', 'response_type must be code.', true);
    let scopes: readonly Scope[] = application.scopes;
    if (p.scope !== undefined && p.scope.trim() !== '') {
      const { scopes: asked, unknown } = parseScopes(p.scope);
      if (unknown.length > 0 || asked.some((s) => !application.scopes.includes(s)))
        throw new AuthorizeProblem('invalid_scope', `scope not allowed for this client: ${p.scope}`, true);
      scopes = asked;
    }
    let codeChallenge: string | null = null;
    if (p.code_challenge !== undefined) {
      if ((p.code_challenge_method ?? 'plain') !== 'S256')
        throw new AuthorizeProblem('invalid_request', 'code_challenge_method must be S256.', true);
      if (!/^[A-Za-z0-9_-]{43}$/.test(p.code_challenge))
        throw new AuthorizeProblem(
          'invalid_request',
          'code_challenge must be a base64url SHA-256 (43 characters).',
          true,
        );
      codeChallenge = p.code_challenge;
    }
    if (p.state !== undefined && p.state.length > 500)
      throw new AuthorizeProblem('invalid_request', 'state is longer than 500 characters.', true);
    return { application, redirectUri, scopes, state: p.state, codeChallenge };
  }

  /**
   * The signed-in user's consent: a single-use code (stored hashed, valid CODE_SECONDS) for the
   * application to exchange. `csrf` must be the session's. Throws AuthorizeProblem otherwise.
   */
  async approve(
    signedIn: SignedIn,
    request: AuthorizeRequest,
    csrf: string | undefined,
    clientAddress: string | null,
  ): Promise<string> {
    if (!tokensEqual(csrf, signedIn.session.csrf))
      throw new AuthorizeProblem('invalid_request', 'The form has expired: start again.', false);
    const foreign = foreignApplication(signedIn, request);
    if (foreign !== undefined) throw foreign;
    if (signedIn.needsEnrolment)
      throw new AuthorizeProblem('access_denied', 'This account requires a second factor: enrol one first.', false);
    const now = this.deps.clock.nowSeconds();
    const code = randomBytes(32).toString('base64url');
    await this.deps.oauthCodes.create(
      {
        codeHash: hashSecret(code),
        applicationId: request.application.id,
        userId: signedIn.user.id,
        customerId: signedIn.user.customerId,
        redirectUri: request.redirectUri,
        scopes: request.scopes,
        codeChallenge: request.codeChallenge,
        expiresAt: now + CODE_SECONDS,
      },
      now,
    );
    await this.deps.audit.append({
      at: now,
      customerId: signedIn.user.customerId,
      actor: `user:${signedIn.user.id}`,
      clientAddress,
      action: 'oauth.authorized',
      subject: `app:${request.application.clientId}`,
      details: { scopes: request.scopes },
    });
    return code;
  }
}

/**
 * Why this person may not authorise this application, or undefined: an application acts within
 * the account it belongs to (as its client_credentials tokens do), so only that account's people
 * can consent for it. Shown to the person, never sent to the application.
 */
export function foreignApplication(signedIn: SignedIn, request: AuthorizeRequest): AuthorizeProblem | undefined {
  return signedIn.user.customerId === request.application.customerId
    ? undefined
    : new AuthorizeProblem(
        'access_denied',
        'This application belongs to another account: only the people of that account can authorise it.',
        false,
      );
}

/** RFC 7636 §4.6: BASE64URL(SHA256(code_verifier)) == code_challenge. */
export function pkceMatches(verifier: string | undefined, challenge: string): boolean {
  if (verifier === undefined || !/^[A-Za-z0-9._~-]{43,128}$/.test(verifier)) return false;
  return tokensEqual(createHash('sha256').update(verifier).digest('base64url'), challenge);
}

export function tokensEqual(a: string | undefined, b: string): boolean {
  if (a === undefined) return false;
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
