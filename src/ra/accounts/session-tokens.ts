import { randomBytes } from 'node:crypto';
import { SCOPES, type Clock } from '../../core/index.js';
import type { AuditRepo, TokensRepo } from '../../storage/index.js';
import { hashSecret } from './secrets.js';
import type { SignedIn } from './sign-in.js';

// The web interface is certdesk's own client of /rest/v1. A signed-in session's API token is
// derived from the session cookie with a key only this installation holds (HMAC): nothing but
// the cookie's hash and the token's hash is stored, the browser never sees the token, and no
// one can compute it without both the cookie and the key file. It carries every scope, so the
// user's roles alone limit it, exactly as the API limits any token; it ends with the session.

export interface SessionTokensDeps {
  readonly tokens: Pick<TokensRepo, 'insertOnce' | 'revokeOne'>;
  readonly audit: Pick<AuditRepo, 'append'>;
  readonly clock: Clock;
  /** HMAC under the installation's key (`secretMac` of the key file). */
  readonly mac: (input: string) => string;
}

export class SessionTokens {
  constructor(private readonly deps: SessionTokensDeps) {}

  /** The API token of a session cookie (computed, not looked up). */
  tokenOf(cookie: string): string {
    return `cdu_${this.deps.mac(`web session ${cookie}`)}`;
  }

  /**
   * Makes the token of a complete session usable (once; a second call, or a race of two, changes
   * nothing, and a revoked token stays revoked). Valid until the session ends.
   */
  async activate(signedIn: SignedIn, cookie: string, clientAddress: string | null): Promise<string> {
    const token = this.tokenOf(cookie);
    const now = this.deps.clock.nowSeconds();
    await this.deps.tokens.insertOnce(
      {
        hash: hashSecret(token),
        kind: 'access',
        family: randomBytes(16).toString('hex'),
        applicationId: null,
        userId: signedIn.user.id,
        customerId: signedIn.user.customerId,
        scopes: SCOPES,
        authType: 'UI',
        expiresAt: signedIn.session.expiresAt,
      },
      now,
    );
    await this.deps.audit.append({
      at: now,
      customerId: signedIn.user.customerId,
      actor: `user:${signedIn.user.id}`,
      clientAddress,
      action: 'token.web-session',
      subject: `user:${signedIn.user.id}`,
    });
    return token;
  }

  /** Ends a session's token (at sign-out). */
  async revoke(cookie: string): Promise<void> {
    await this.deps.tokens.revokeOne(hashSecret(this.tokenOf(cookie)), this.deps.clock.nowSeconds());
  }
}
