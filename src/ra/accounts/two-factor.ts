import { randomInt } from 'node:crypto';
import { Secret, TOTP } from 'otpauth';
import type { Clock } from '../../core/index.js';
import type { SecretSealer } from '../../ca/index.js';
import type { AuditRepo, TwoFactorRepo, WebSessionsRepo } from '../../storage/index.js';
import { hashSecret } from './secrets.js';
import type { SignedIn } from './sign-in.js';
import type { SignInThrottle } from './sign-in-throttle.js';

// The second factor of people (RFC 6238 TOTP, with the otpauth library): enrolment with a QR
// code, verified by a first code; ten single-use recovery codes; the code step of signing in.

/** RFC 6238 defaults, which every authenticator app uses: SHA-1, 6 digits, 30 s steps. */
const PERIOD = 30;
/** One step either side: a phone's clock may be a little off (RFC 6238 §5.2 recommends at most one). */
const WINDOW = 1;
const RECOVERY_CODES = 10;
/** Recovery code characters: no 0/O or 1/I/L to misread. */
const RECOVERY_ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789';

export interface TwoFactorDeps {
  readonly twoFactor: TwoFactorRepo;
  readonly webSessions: Pick<WebSessionsRepo, 'completeSecondFactor'>;
  readonly audit: Pick<AuditRepo, 'append'>;
  readonly clock: Clock;
  readonly throttle: Pick<SignInThrottle, 'wait' | 'failed' | 'succeeded'>;
  /** TOTP seeds are stored sealed (they must be read to check a code, so they cannot be hashed). */
  readonly sealer: SecretSealer;
}

/** What a user's seed is sealed to: it opens for that user only. */
const sealedFor = (user: { id: number }) => `user:${user.id}:totp`;

export class TwoFactor {
  constructor(private readonly deps: TwoFactorDeps) {}

  /**
   * The code step of signing in: a TOTP code (each time step good once) or an unused recovery
   * code (used up). True when it was right, and the session is complete from now on; false,
   * changing nothing, otherwise; `throttled` (nothing checked) after repeated failures, which count
   * with the password's (SignInThrottle). Both outcomes are audit events.
   */
  async verify(
    pending: SignedIn,
    code: string,
    clientAddress: string | null,
  ): Promise<boolean | { throttled: number }> {
    const user = pending.user;
    const retryAfter = await this.deps.throttle.wait(user.username, clientAddress);
    if (retryAfter > 0) return { throttled: retryAfter };
    const now = this.deps.clock.nowSeconds();
    const given = code.replace(/[\s-]/g, '').toLowerCase();
    let ok = false;
    if (/^[0-9]{6}$/.test(given)) {
      const { active } = await this.deps.twoFactor.secrets(user.id);
      const step =
        active === null ? undefined : this.stepOf(this.deps.sealer.open(sealedFor(user), active), given, now);
      ok = step !== undefined && (await this.deps.twoFactor.acceptStep(user.id, step));
    } else if (/^[a-z0-9]{10}$/.test(given)) {
      ok = await this.deps.twoFactor.useRecoveryCode(user.id, hashSecret(given), now);
    }
    if (ok) {
      await this.deps.webSessions.completeSecondFactor(pending.session.id);
      await this.deps.throttle.succeeded(user.username);
    } else await this.deps.throttle.failed(user.username, clientAddress);
    await this.deps.audit.append({
      at: now,
      customerId: user.customerId,
      actor: `user:${user.id}`,
      clientAddress,
      action: ok ? 'user.second-factor' : 'user.second-factor-failed',
      subject: `user:${user.id}`,
    });
    return ok;
  }

  /** Starts an enrolment: a new secret, kept as pending; the otpauth:// URI an authenticator app scans. */
  async startEnrolment(signedIn: SignedIn): Promise<{ secret: string; uri: string }> {
    const secret = newTotpSecret();
    await this.deps.twoFactor.setPending(signedIn.user.id, this.deps.sealer.seal(sealedFor(signedIn.user), secret));
    return { secret, uri: this.totp(secret, signedIn.user.username).toString() };
  }

  /**
   * Ends an enrolment with a first code from the app: the secret becomes the user's, and ten new
   * recovery codes (shown once; stored hashed) are returned. Undefined, enrolling nothing, for a
   * wrong code or no enrolment in progress.
   */
  async confirmEnrolment(
    signedIn: SignedIn,
    code: string,
    clientAddress: string | null,
  ): Promise<string[] | undefined> {
    const user = signedIn.user;
    const now = this.deps.clock.nowSeconds();
    const { pending } = await this.deps.twoFactor.secrets(user.id);
    const given = code.replace(/\s/g, '');
    const step =
      pending === null || !/^[0-9]{6}$/.test(given)
        ? undefined
        : this.stepOf(this.deps.sealer.open(sealedFor(user), pending), given, now);
    if (step === undefined || !(await this.deps.twoFactor.enable(user.id, pending!, step, now))) return undefined;
    const codes = Array.from({ length: RECOVERY_CODES }, () =>
      Array.from({ length: 10 }, () => RECOVERY_ALPHABET[randomInt(RECOVERY_ALPHABET.length)]).join(''),
    );
    await this.deps.twoFactor.replaceRecoveryCodes(user.id, codes.map(hashSecret), now);
    await this.deps.audit.append({
      at: now,
      customerId: user.customerId,
      actor: `user:${user.id}`,
      clientAddress,
      action: 'user.two-factor-enabled',
      subject: `user:${user.id}`,
    });
    return codes.map((c) => `${c.slice(0, 5)}-${c.slice(5)}`);
  }

  private stepOf(secret: string, code: string, now: number): number | undefined {
    return totpStepOf(secret, code, now);
  }

  private totp(secret: string, label: string): TOTP {
    return totpOf(secret, label);
  }
}

/** The time step `code` is right for with base32 `secret`, within the window around `now`; undefined when none. */
export function totpStepOf(secret: string, code: string, now: number): number | undefined {
  const delta = totpOf(secret, '').validate({ token: code, timestamp: now * 1000, window: WINDOW });
  return delta === null ? undefined : Math.floor(now / PERIOD) + delta;
}

/** The TOTP of a base32 secret (RFC 6238 defaults): `.toString()` is the otpauth:// URI an app scans. */
export function totpOf(secret: string, label: string, issuer = 'certdesk'): TOTP {
  return new TOTP({
    issuer,
    label,
    algorithm: 'SHA1',
    digits: 6,
    period: PERIOD,
    secret: Secret.fromBase32(secret),
  });
}

/** A new random TOTP secret (160 bits, RFC 4226 §4), base32. */
export function newTotpSecret(): string {
  return new Secret({ size: 20 }).base32;
}
