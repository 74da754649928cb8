import { randomBytes } from 'node:crypto';
import { CertdeskError, type Clock } from '../../core/index.js';
import type { SecretSealer } from '../../ca/index.js';
import type { AuditRepo, Operator, OperatorSession, OperatorsRepo } from '../../storage/index.js';
import { hashPassword, hashSecret, newPassword, passwordMatches } from '../accounts/secrets.js';
import { tokensEqual } from '../accounts/sign-in.js';
import type { SignInThrottle } from '../accounts/sign-in-throttle.js';
import { newTotpSecret, totpOf, totpStepOf } from '../accounts/two-factor.js';

// The service's operators: accounts of their own (not customers' users), a password and a
// mandatory TOTP code to sign in, short sessions. Created only on the command line.

/** A session lasts at most this long from the code step (seconds). */
export const OPERATOR_SESSION_SECONDS = 8 * 3600;
/** A session unused for this long ends (seconds). */
export const OPERATOR_IDLE_SECONDS = 30 * 60;
/** The time between the password and the code step (seconds). */
const PENDING_SECONDS = 5 * 60;

const USERNAME = /^[a-z0-9][a-z0-9._-]{1,63}$/;
const COOKIE = /^cdo_[A-Za-z0-9_-]{43}$/;

/** What a seed is sealed to: it opens for that operator only. */
const sealedFor = (username: string) => `operator:${username}:totp`;

export interface OperatorsDeps {
  readonly operators: OperatorsRepo;
  readonly audit: Pick<AuditRepo, 'append'>;
  readonly clock: Clock;
  /** Counts failures under `o:<username>` keys (and the address's), apart from customers' users. */
  readonly throttle: Pick<SignInThrottle, 'wait' | 'failed' | 'succeeded'>;
  readonly sealer: SecretSealer;
}

/** A created operator: what `certdesk operator add` prints once. */
export interface CreatedOperator {
  readonly username: string;
  readonly password: string;
  readonly totpSecret: string;
  readonly otpauthUri: string;
}

export type OperatorSignIn =
  | { readonly kind: 'pending'; readonly cookie: string }
  | { readonly kind: 'failed' }
  | { readonly kind: 'throttled'; readonly retryAfter: number };

export class Operators {
  constructor(private readonly deps: OperatorsDeps) {}

  /**
   * Creates an operator with a generated password and TOTP seed (shown once: only the argon2id
   * hash and the sealed seed are stored). Throws invalidInput for a bad username, conflict when taken.
   */
  async add(username: string): Promise<CreatedOperator> {
    if (!USERNAME.test(username))
      throw new CertdeskError('invalidInput', 'username: 2 to 64 of a-z 0-9 . _ -, starting with a letter or digit');
    const password = newPassword();
    const totpSecret = newTotpSecret();
    const now = this.deps.clock.nowSeconds();
    const created = await this.deps.operators.create(
      {
        username,
        passwordHash: await hashPassword(password),
        sealedTotpSecret: this.deps.sealer.seal(sealedFor(username), totpSecret),
      },
      now,
    );
    if (!created) throw new CertdeskError('conflict', `operator ${username} exists already`);
    await this.audit(now, 'operator', null, 'operator.created', username);
    const otpauthUri = totpOf(totpSecret, username, 'certdesk operators').toString();
    return { username, password, totpSecret, otpauthUri };
  }

  list(): Promise<Operator[]> {
    return this.deps.operators.list();
  }

  /** Disables an operator and ends its sessions. Throws notFound when there is no such enabled operator. */
  async disable(username: string): Promise<void> {
    const now = this.deps.clock.nowSeconds();
    if (!(await this.deps.operators.disable(username, now)))
      throw new CertdeskError('notFound', `no enabled operator ${username}`);
    await this.audit(now, 'operator', null, 'operator.disabled', username);
  }

  /**
   * The password step: a session good for the code step only (its cookie value, shown once), or
   * `failed` — the same answer, in the same time, for an unknown or disabled operator and a wrong
   * password — or `throttled` without checking anything. Every attempt is an audit event.
   */
  async signIn(username: string, password: string, clientAddress: string | null): Promise<OperatorSignIn> {
    const retryAfter = await this.deps.throttle.wait(username, clientAddress);
    if (retryAfter > 0) return { kind: 'throttled', retryAfter };
    const now = this.deps.clock.nowSeconds();
    const found = USERNAME.test(username) ? await this.deps.operators.credentials(username) : undefined;
    const ok = await passwordMatches(password.slice(0, 1024), found?.passwordHash);
    const name = found?.operator.username ?? 'unknown';
    const actor = ok ? `operator:${name}` : 'anonymous';
    await this.audit(now, actor, clientAddress, ok ? 'operator.password-ok' : 'operator.sign-in-failed', name);
    if (!ok || found === undefined) {
      await this.deps.throttle.failed(username, clientAddress);
      return { kind: 'failed' };
    }
    const cookie = `cdo_${randomBytes(32).toString('base64url')}`;
    await this.deps.operators.createSession(
      {
        tokenHash: hashSecret(cookie),
        operatorId: found.operator.id,
        csrf: randomBytes(24).toString('base64url'),
        expiresAt: now + PENDING_SECONDS,
      },
      now,
    );
    return { kind: 'pending', cookie };
  }

  /**
   * The code step: a TOTP code (each time step good once). True when right — the session is a full
   * one from now on, for OPERATOR_SESSION_SECONDS — false otherwise, `throttled` after repeated
   * failures (counted with the password's). Both outcomes are audit events.
   */
  async verifyCode(
    pending: OperatorSession,
    code: string,
    clientAddress: string | null,
  ): Promise<boolean | { throttled: number }> {
    const username = pending.operator.username;
    const retryAfter = await this.deps.throttle.wait(username, clientAddress);
    if (retryAfter > 0) return { throttled: retryAfter };
    const now = this.deps.clock.nowSeconds();
    const given = code.replace(/\s/g, '');
    let ok = false;
    if (/^[0-9]{6}$/.test(given)) {
      const found = await this.deps.operators.credentials(username);
      const step =
        found === undefined
          ? undefined
          : totpStepOf(this.deps.sealer.open(sealedFor(username), found.sealedTotpSecret), given, now);
      ok =
        step !== undefined &&
        (await this.deps.operators.acceptStep(pending.operator.id, step)) &&
        (await this.deps.operators.completeSecondFactor(pending.id, now + OPERATOR_SESSION_SECONDS, now));
    }
    if (ok) await this.deps.throttle.succeeded(username);
    else await this.deps.throttle.failed(username, clientAddress);
    const action = ok ? 'operator.signed-in' : 'operator.code-failed';
    await this.audit(now, `operator:${username}`, clientAddress, action, username);
    return ok;
  }

  /** The full session of a cookie (and the request counts as activity); undefined when signed out, expired, idle or pending. */
  async session(cookie: string | undefined): Promise<OperatorSession | undefined> {
    const found = await this.anySession(cookie);
    if (found === undefined || found.secondFactorPending) return undefined;
    await this.deps.operators.touchSession(found.id, this.deps.clock.nowSeconds());
    return found;
  }

  /** The session of a cookie that is past the password and waits for the code. */
  async pendingSession(cookie: string | undefined): Promise<OperatorSession | undefined> {
    const found = await this.anySession(cookie);
    return found?.secondFactorPending === true ? found : undefined;
  }

  /** Whether a form's CSRF token is the session's (constant time). */
  csrfMatches(session: OperatorSession, given: unknown): boolean {
    return typeof given === 'string' && tokensEqual(given, session.csrf);
  }

  async signOut(session: OperatorSession, cookie: string, clientAddress: string | null): Promise<void> {
    const now = this.deps.clock.nowSeconds();
    await this.deps.operators.revokeSession(hashSecret(cookie), now);
    const name = session.operator.username;
    await this.audit(now, `operator:${name}`, clientAddress, 'operator.signed-out', name);
  }

  private async anySession(cookie: string | undefined): Promise<OperatorSession | undefined> {
    if (cookie === undefined || !COOKIE.test(cookie)) return undefined;
    const now = this.deps.clock.nowSeconds();
    return this.deps.operators.findLiveSession(hashSecret(cookie), now, now - OPERATOR_IDLE_SECONDS);
  }

  /** An audit event about an operator account; `actor` as AuditEvent names it (`operator:<username>`, `anonymous`, `operator` for the CLI). */
  private audit(at: number, actor: string, clientAddress: string | null, action: string, subject: string) {
    return this.deps.audit.append({
      at,
      customerId: null,
      actor,
      clientAddress,
      action,
      subject: `operator:${subject}`,
    });
  }
}
