import {
  CertdeskError,
  ROLES,
  isRole,
  parseBoolish,
  userId as toUserId,
  type Clock,
  type CustomerId,
  type FieldFault,
  type Principal,
  type Role,
  type User,
} from '../../core/index.js';
import type {
  ApplicationsRepo,
  AuditRepo,
  CustomersRepo,
  TokensRepo,
  UserChanges,
  UsersRepo,
  WebSessionsRepo,
} from '../../storage/index.js';
import { isUniqueViolation } from '../../storage/index.js';
import { actorName, type Actor } from './actor.js';
import { passwordProblem } from './password-policy.js';
import type { PrincipalCache } from './principal-cache.js';
import type { SignInThrottle } from './sign-in-throttle.js';
import { hashPassword, passwordMatches } from './secrets.js';

// The users of a customer (spec §2.12, §4.24–4.27; DESIGN §5.3): people with roles. Only ADMIN
// reaches these methods (the access table); the last active ADMIN of a customer stays one.

/** The body of POST /User and POST /User/{id} as sent: every member is checked here. */
export interface UserInput {
  readonly FullName?: unknown;
  readonly Email?: unknown;
  readonly Username?: unknown;
  readonly Password?: unknown;
  readonly Roles?: unknown;
  readonly Mobile?: unknown;
  readonly Timezone?: unknown;
  readonly Locale?: unknown;
  /** Spec §4.25: accepted in place of Locale. */
  readonly Language?: unknown;
  readonly Active?: unknown;
}

/** The repositories a change of users writes through, in one transaction. */
export interface UserRepos {
  readonly users: UsersRepo;
  readonly customers: Pick<CustomersRepo, 'byId' | 'lock'>;
  readonly tokens: Pick<TokensRepo, 'revokeAllOfUser'>;
  readonly webSessions: Pick<WebSessionsRepo, 'revokeAllOfUser'>;
  readonly applications: Pick<ApplicationsRepo, 'revokeAllOfUser'>;
  readonly audit: Pick<AuditRepo, 'append'>;
}

export interface UsersDeps extends UserRepos {
  readonly transact: <T>(fn: (repos: UserRepos) => Promise<T>) => Promise<T>;
  /** Cleared after every change that ends tokens, so this process refuses them at once. */
  readonly principals: Pick<PrincipalCache, 'clear'>;
  readonly clock: Clock;
  /** The sign-in throttle, which also counts wrong current passwords on a person's own password change. */
  readonly throttle?: Pick<SignInThrottle, 'wait' | 'failed' | 'succeeded'>;
}

const USERNAME = /^[A-Za-z0-9._@-]{3,64}$/;
const EMAIL = /^[a-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[a-z0-9-]+(\.[a-z0-9-]+)+$/i;
const LOCALE = /^[a-z]{2}_[A-Z]{2}$/;
const MOBILE = /^[0-9+() ./-]{3,40}$/;

const LAST_ADMIN = 'The last active ADMIN of a customer can be neither deleted, deactivated nor demoted.';

export class Users {
  constructor(private readonly deps: UsersDeps) {}

  /**
   * POST /User: a new user of the caller's customer. Throws one invalidInput error with every
   * fault (each with its field; a password names the rule it breaks); creates nothing then.
   */
  async createUser(actor: Actor, input: UserInput): Promise<User> {
    const customerId = actor.principal.customerId;
    const faults: FieldFault[] = [];
    const bad = (field: string, message: string) => faults.push({ kind: 'invalidInput', field, message });
    const username = text(input.Username);
    if (username === undefined || !USERNAME.test(username))
      bad('Username', 'Username is required: 3 to 64 letters, digits or . _ @ -.');
    else if (await this.deps.users.usernameTaken(username)) bad('Username', `Username ${username} is taken.`);
    const fullName = text(input.FullName);
    if (fullName === undefined || fullName.length > 200)
      bad('FullName', 'FullName is required (at most 200 characters).');
    const email = text(input.Email);
    if (email === undefined || !EMAIL.test(email)) bad('Email', 'Email is required: an e-mail address.');
    const roles = readRoles(input.Roles, bad, true);
    const profile = readProfile(input, bad);
    const password = typeof input.Password === 'string' ? input.Password : undefined;
    if (password === undefined || password === '') bad('Password', 'Password is required.');
    else await this.checkPassword(customerId, password, username ?? '', email ?? '', bad);
    if (faults.length > 0) throw CertdeskError.ofFaults(faults);

    const passwordHash = await hashPassword(password!);
    const now = this.deps.clock.nowSeconds();
    const taken = () =>
      CertdeskError.ofFaults([{ kind: 'invalidInput', field: 'Username', message: `Username ${username} is taken.` }]);
    const created = this.deps.transact(async (repos) => {
      const user = await repos.users.create(
        {
          customerId,
          username: username!,
          fullName: fullName!,
          email: email!,
          passwordHash,
          roles: roles!,
          ...profile,
        },
        now,
      );
      await this.audit(repos, actor, now, 'user.created', user, { roles: user.roles });
      return user;
    });
    // Another request took the name since it was looked up: the same answer as if it had been first.
    return created.catch((e: unknown) => {
      throw isUniqueViolation(e) ? taken() : e;
    });
  }

  /**
   * POST /User/{UsernameOrId}: changes the members given. The username cannot change; a new
   * password ends the user's sign-in sessions; deactivating ends every token it holds and its
   * applications'. Throws notFound for a user of another customer, conflict for the last ADMIN.
   */
  async updateUser(actor: Actor, usernameOrId: string, input: UserInput): Promise<User> {
    const customerId = actor.principal.customerId;
    const user = await this.find(actor.principal, usernameOrId);
    const faults: FieldFault[] = [];
    const bad = (field: string, message: string) => faults.push({ kind: 'invalidInput', field, message });
    const username = text(input.Username);
    if (input.Username !== undefined && username !== user.username)
      bad('Username', 'Username cannot be changed after the user is created.');
    const changes: { -readonly [K in keyof UserChanges]: UserChanges[K] } = { ...readProfile(input, bad) };
    if (input.FullName !== undefined) {
      const fullName = text(input.FullName);
      if (fullName === undefined || fullName.length > 200) bad('FullName', 'FullName must be 1 to 200 characters.');
      else changes.fullName = fullName;
    }
    if (input.Email !== undefined) {
      const email = text(input.Email);
      if (email === undefined || !EMAIL.test(email)) bad('Email', 'Email must be an e-mail address.');
      else changes.email = email;
    }
    if (input.Roles !== undefined) changes.roles = readRoles(input.Roles, bad, true);
    if (input.Active !== undefined) {
      const active = parseBoolish(input.Active);
      if (active === undefined) bad('Active', 'Active must be true or false.');
      else changes.active = active;
    }
    let password: string | undefined;
    if (input.Password !== undefined) {
      password = typeof input.Password === 'string' ? input.Password : '';
      await this.checkPassword(customerId, password, user.username, changes.email ?? user.email, bad);
    }
    if (faults.length > 0) throw CertdeskError.ofFaults(faults);
    if (password !== undefined) changes.passwordHash = await hashPassword(password);

    const now = this.deps.clock.nowSeconds();
    const updated = await this.deps.transact(async (repos) => {
      await repos.customers.lock(customerId, now);
      const after = await repos.users.update(customerId, user.id, changes, now);
      if (after === undefined) throw notFound(usernameOrId);
      if (isActiveAdmin(user) && !isActiveAdmin(after) && !(await hasActiveAdmin(repos.users, customerId)))
        throw new CertdeskError('conflict', LAST_ADMIN, { field: 'Roles' });
      // Deactivated: every token it holds ends; a new password ends its sign-in sessions.
      if (user.active && !after.active) await repos.tokens.revokeAllOfUser(user.id, now);
      else if (password !== undefined) await repos.tokens.revokeAllOfUser(user.id, now, 'UI');
      if ((user.active && !after.active) || password !== undefined)
        await repos.webSessions.revokeAllOfUser(user.id, now);
      const { passwordHash: _hash, ...shown } = changes;
      await this.audit(repos, actor, now, 'user.updated', after, {
        changed: [...Object.keys(shown), ...(password === undefined ? [] : ['password'])],
        ...(changes.roles === undefined ? {} : { roles: changes.roles }),
        ...(changes.active === undefined ? {} : { active: changes.active }),
      });
      return after;
    });
    await this.deps.principals.clear();
    return updated;
  }

  /**
   * A person's own settings (the web interface's profile): language, time zone, mobile, and a new
   * password after the current one. Whatever the person's roles: these are their own. The same
   * checks and effects as updateUser (a new password ends the person's sessions); a wrong current
   * password changes nothing.
   */
  async updateOwn(
    actor: Actor,
    input: { Locale?: string; Timezone?: string; Mobile?: string; Password?: string; CurrentPassword?: string },
  ): Promise<User> {
    const own = actor.principal.userId;
    if (own === null) throw new CertdeskError('forbidden', 'Only a person can change their own profile.');
    if (input.Password !== undefined) {
      // A stolen session must not become a way to guess the password: the sign-in's throttle counts these too.
      const user = await this.find(actor.principal, String(own));
      const retryAfter = (await this.deps.throttle?.wait(user.username, actor.clientAddress)) ?? 0;
      if (retryAfter > 0)
        throw new CertdeskError('rateLimited', `Too many wrong passwords: try again in ${retryAfter} s.`);
      const found = await this.deps.users.credentials(user.username);
      if (!(await passwordMatches(input.CurrentPassword ?? '', found?.passwordHash))) {
        await this.deps.throttle?.failed(user.username, actor.clientAddress);
        await this.deps.audit.append({
          at: this.deps.clock.nowSeconds(),
          customerId: user.customerId,
          actor: actorName(actor.principal),
          clientAddress: actor.clientAddress,
          action: 'user.password-check-failed',
          subject: `user:${user.id}`,
        });
        throw new CertdeskError('invalidInput', 'The current password is not right.', { field: 'CurrentPassword' });
      }
      await this.deps.throttle?.succeeded(user.username);
    }
    const { CurrentPassword: _current, ...changes } = input;
    return this.updateUser(actor, String(own), changes);
  }

  /** GET /User: the customer's live users, by id. */
  listUsers(principal: Principal): Promise<User[]> {
    return this.deps.users.listByCustomer(principal.customerId);
  }

  /** GET /User/{UsernameOrId}. Throws notFound for an unknown user or another customer's. */
  getUser(principal: Principal, usernameOrId: string): Promise<User> {
    return this.find(principal, usernameOrId);
  }

  /**
   * DELETE /User/{UsernameOrId}: the user is deleted (kept for the audit trail, its username not
   * reused), every token it holds and every application it owns revoked. Throws notFound, or
   * conflict for the last active ADMIN.
   */
  async deleteUser(actor: Actor, usernameOrId: string): Promise<User> {
    const customerId = actor.principal.customerId;
    const user = await this.find(actor.principal, usernameOrId);
    const now = this.deps.clock.nowSeconds();
    await this.deps.transact(async (repos) => {
      await repos.customers.lock(customerId, now);
      if (!(await repos.users.markDeleted(customerId, user.id, now))) throw notFound(usernameOrId);
      if (isActiveAdmin(user) && !(await hasActiveAdmin(repos.users, customerId)))
        throw new CertdeskError('conflict', LAST_ADMIN, { field: 'UsernameOrId' });
      await repos.tokens.revokeAllOfUser(user.id, now);
      await repos.webSessions.revokeAllOfUser(user.id, now);
      const applications = await repos.applications.revokeAllOfUser(user.id, now);
      await this.audit(repos, actor, now, 'user.deleted', user, { applicationsRevoked: applications });
    });
    await this.deps.principals.clear();
    return user;
  }

  /**
   * A live user of the caller's customer by id or username: a path of digits is an id first,
   * then a username (usernames may look like numbers). Throws notFound otherwise.
   */
  private async find(principal: Principal, usernameOrId: string): Promise<User> {
    const key = usernameOrId.trim();
    const byId = /^[0-9]{1,10}$/.test(key)
      ? await this.deps.users.byId(principal.customerId, toUserId(Number(key)))
      : undefined;
    const user = byId ?? (await this.deps.users.byUsername(principal.customerId, key));
    if (user === undefined) throw notFound(usernameOrId);
    return user;
  }

  private async checkPassword(
    customerId: CustomerId,
    password: string,
    username: string,
    email: string,
    bad: (field: string, message: string) => void,
  ): Promise<void> {
    const customer = await this.deps.customers.byId(customerId);
    const problem = await passwordProblem(password, { minLength: customer?.passwordMinLength ?? 12, username, email });
    if (problem !== undefined) bad('Password', problem);
  }

  private audit(
    repos: Pick<UserRepos, 'audit'>,
    actor: Actor,
    at: number,
    action: string,
    user: User,
    details: Record<string, unknown>,
  ): Promise<void> {
    return repos.audit.append({
      at,
      customerId: user.customerId,
      actor: actorName(actor.principal),
      clientAddress: actor.clientAddress,
      action,
      subject: `user:${user.id}`,
      details: { username: user.username, ...details },
    });
  }
}

const text = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined);
const notFound = (usernameOrId: string) =>
  new CertdeskError('notFound', `No user ${usernameOrId} in this account.`, { field: 'UsernameOrId' });
const isActiveAdmin = (u: User) => u.active && u.roles.includes('ADMIN');

async function hasActiveAdmin(users: Pick<UsersRepo, 'listByCustomer'>, customerId: CustomerId): Promise<boolean> {
  return (await users.listByCustomer(customerId)).some(isActiveAdmin);
}

/** Roles as an array of names or one comma-separated string: a non-empty subset of ROLES. */
function readRoles(
  value: unknown,
  bad: (field: string, message: string) => void,
  required: boolean,
): Role[] | undefined {
  const names = (Array.isArray(value) ? value : typeof value === 'string' ? value.split(',') : [])
    .map((r: unknown) => (typeof r === 'string' ? r.trim().toUpperCase() : ''))
    .filter((r) => r !== '');
  const unknown = names.filter((r) => !isRole(r));
  if (unknown.length > 0 || (required && names.length === 0)) {
    bad('Roles', `Roles must be one or more of ${ROLES.join(', ')}.`);
    return undefined;
  }
  return [...new Set(names as Role[])];
}

/** Mobile, Timezone and Locale (or Language), each checked when given. */
function readProfile(
  input: UserInput,
  bad: (field: string, message: string) => void,
): Pick<UserChanges, 'mobile' | 'timezone' | 'locale'> {
  const out: { mobile?: string | null; timezone?: string | null; locale?: string | null } = {};
  if (input.Mobile !== undefined && input.Mobile !== null) {
    const mobile = typeof input.Mobile === 'string' ? input.Mobile.trim() : undefined;
    if (mobile === undefined || (mobile !== '' && !MOBILE.test(mobile)))
      bad('Mobile', 'Mobile must be a phone number (digits, spaces and + ( ) . / -).');
    else out.mobile = mobile === '' ? null : mobile;
  }
  if (input.Timezone !== undefined && input.Timezone !== null) {
    const timezone = text(input.Timezone);
    if (timezone === undefined || !isTimeZone(timezone)) bad('Timezone', 'Timezone must be an IANA time zone name.');
    else out.timezone = timezone;
  }
  const localeValue = input.Locale ?? input.Language;
  if (localeValue !== undefined && localeValue !== null) {
    const locale = text(localeValue);
    if (locale === undefined || !LOCALE.test(locale))
      bad(input.Locale !== undefined ? 'Locale' : 'Language', 'Locale must be <language>_<COUNTRY>, e.g. de_DE.');
    else out.locale = locale;
  }
  return out;
}

export function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}
