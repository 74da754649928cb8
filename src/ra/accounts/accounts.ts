import type { Application, Customer, CustomerId, Principal, Role, Scope, User, UserId } from '../../core/index.js';
import { CertdeskError, SCOPES, isCurrencyCode, toMinor, type Clock } from '../../core/index.js';
import type { ApplicationsRepo, AuditEvent, AuditRepo, CustomersRepo, UsersRepo } from '../../storage/index.js';
import { hashPassword, hashSecret, newPassword, newSecret } from './secrets.js';
import { isTimeZone } from './users.js';
import { randomBytes } from 'node:crypto';

export interface NewCustomerInput {
  readonly name: string;
  readonly email: string;
  readonly currency: string;
  /** In major units of the currency (e.g. 5000 = 5,000.00 EUR). */
  readonly creditLimit: number;
  readonly country?: string;
  readonly locale?: string;
  readonly timezone?: string;
}

export interface CreatedCustomer {
  readonly customer: Customer;
  readonly user: User;
  /** Shown once; only its argon2id hash is stored. */
  readonly password: string;
  readonly application: Application;
  /** Shown once; only its SHA-256 is stored. */
  readonly clientSecret: string;
}

/** The repositories account changes write through. */
export interface AccountRepos {
  readonly customers: CustomersRepo;
  readonly users: UsersRepo;
  readonly applications: ApplicationsRepo;
  readonly audit: AuditRepo;
}

export interface AccountsDeps extends AccountRepos {
  /** Runs `fn` in one database transaction, with repositories that write through it. */
  readonly transact: <T>(fn: (repos: AccountRepos) => Promise<T>) => Promise<T>;
  readonly clock: Clock;
  /** Currencies the catalog prices in; an account in another currency could not be quoted. */
  readonly currencies: readonly string[];
}

/** Customers, their users and API applications: creation and the caller's own profile. */
export class Accounts {
  constructor(private readonly deps: AccountsDeps) {}

  /**
   * Registers a customer with an ADMIN user and an API application holding every scope.
   * Throws CertdeskError invalidInput (with the field) on bad input; creates nothing then.
   */
  async createCustomer(input: NewCustomerInput): Promise<CreatedCustomer> {
    const faults = [
      input.name.trim() === '' ? 'name: must not be empty' : null,
      /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(input.email) ? null : `email: not an e-mail address: ${input.email}`,
      isCurrencyCode(input.currency) ? null : `currency: not an ISO 4217 code: ${input.currency}`,
      !isCurrencyCode(input.currency) || this.deps.currencies.includes(input.currency)
        ? null
        : `currency: the catalog has no prices in ${input.currency} (it has ${this.deps.currencies.join(', ')})`,
      Number.isFinite(input.creditLimit) && input.creditLimit >= 0 ? null : 'credit-limit: must be a number ≥ 0',
      input.country === undefined || /^[A-Z]{2}$/.test(input.country)
        ? null
        : `country: not an ISO 3166 code: ${input.country}`,
      input.locale === undefined || /^[a-z]{2}_[A-Z]{2}$/.test(input.locale)
        ? null
        : `locale: not <language>_<COUNTRY>: ${input.locale}`,
      input.timezone === undefined || isTimeZone(input.timezone)
        ? null
        : `timezone: not an IANA time zone: ${input.timezone}`,
    ].filter((f): f is string => f !== null);
    if (faults.length > 0)
      throw new CertdeskError('invalidInput', faults.join('; '), { field: faults[0]?.split(':')[0] });

    // Step 1: the slow and random parts outside the transaction.
    const now = this.deps.clock.nowSeconds();
    const country = input.country ?? 'US';
    const password = newPassword();
    const passwordHash = await hashPassword(password);
    const clientSecret = newSecret('cds_');

    // Step 2: customer, admin user, application and audit event together, or nothing.
    return this.deps.transact(async (repos) => {
      const customer = await repos.customers.create(
        {
          name: input.name.trim(),
          email: input.email,
          currency: input.currency,
          creditLimitMinor: toMinor(input.creditLimit, input.currency),
          country,
          locale: input.locale ?? `en_${country}`,
          timezone: input.timezone ?? 'UTC',
        },
        now,
      );
      const user = await repos.users.create(
        {
          customerId: customer.id,
          username: await freeUsername(repos.users, `admin-${customer.id}`),
          fullName: `${customer.name} administrator`,
          email: customer.email,
          passwordHash,
          roles: ['ADMIN'],
        },
        now,
      );
      const application = await insertApplication(repos, {
        customerId: customer.id,
        userId: user.id,
        scopes: [...SCOPES],
        name: 'default',
        clientSecret,
        now,
      });
      await repos.audit.append({
        at: now,
        customerId: customer.id,
        actor: 'operator',
        clientAddress: null,
        action: 'customer.created',
        subject: `customer:${customer.id}`,
      });
      return { customer, user, password, application, clientSecret };
    });
  }

  /**
   * Creates an API application for a customer, owned by `userId` (default: the customer's first
   * ADMIN user). Throws notFound for an unknown customer or user.
   */
  async createApplication(input: {
    customerId: CustomerId;
    scopes: readonly Scope[];
    userId?: UserId;
    name?: string;
  }): Promise<{ application: Application; clientSecret: string }> {
    if (input.scopes.length === 0)
      throw new CertdeskError('invalidInput', 'at least one scope is needed', { field: 'scopes' });
    const owner =
      input.userId !== undefined
        ? await this.deps.users.byId(input.customerId, input.userId)
        : (await this.deps.users.listByCustomer(input.customerId)).find((u) => u.roles.includes('ADMIN'));
    if (owner === undefined)
      throw new CertdeskError('notFound', `no such customer or user: customer ${input.customerId}`);
    const clientSecret = newSecret('cds_');
    const now = this.deps.clock.nowSeconds();
    const application = await this.deps.transact((repos) =>
      insertApplication(repos, {
        customerId: input.customerId,
        userId: owner.id,
        scopes: input.scopes,
        name: input.name ?? 'api',
        clientSecret,
        now,
      }),
    );
    return { application, clientSecret };
  }

  /** The caller's customer (for limits, currency). */
  async customer(principal: Principal): Promise<Customer> {
    const customer = await this.deps.customers.byId(principal.customerId);
    if (customer === undefined) throw new CertdeskError('unauthenticated');
    return customer;
  }

  /**
   * Sets the least length of a customer's users' passwords (8 to 128; NIST SP 800-63B asks for
   * at least 8). Existing passwords stay until they change. Throws invalidInput or notFound.
   */
  async setPasswordMinLength(customerId: CustomerId, length: number): Promise<void> {
    if (!Number.isInteger(length) || length < 8 || length > 128)
      throw new CertdeskError('invalidInput', 'the least password length is a whole number from 8 to 128', {
        field: 'min-length',
      });
    const now = this.deps.clock.nowSeconds();
    await this.deps.transact(async (repos) => {
      if (!(await repos.customers.setPasswordMinLength(customerId, length, now)))
        throw new CertdeskError('notFound', `no such customer: ${customerId}`);
      await repos.audit.append({
        at: now,
        customerId,
        actor: 'operator',
        clientAddress: null,
        action: 'customer.password-policy',
        subject: `customer:${customerId}`,
        details: { minLength: length },
      });
    });
  }

  /** Requires (or stops requiring) a second factor of every user of a customer. Throws notFound. */
  async setRequireTwoFactor(customerId: CustomerId, required: boolean): Promise<void> {
    const now = this.deps.clock.nowSeconds();
    await this.deps.transact(async (repos) => {
      if (!(await repos.customers.setRequireTwoFactor(customerId, required, now)))
        throw new CertdeskError('notFound', `no such customer: ${customerId}`);
      await repos.audit.append({
        at: now,
        customerId,
        actor: 'operator',
        clientAddress: null,
        action: 'customer.two-factor-policy',
        subject: `customer:${customerId}`,
        details: { required },
      });
    });
  }

  /** A customer's audit events, newest first (at most `limit`), for operators. Throws notFound for an unknown customer. */
  async auditEvents(customerId: CustomerId, limit: number): Promise<(AuditEvent & { id: number })[]> {
    if ((await this.deps.customers.byId(customerId)) === undefined)
      throw new CertdeskError('notFound', `no such customer: ${customerId}`);
    return this.deps.audit.listByCustomer(customerId, limit);
  }

  /** Every customer, for operators. */
  listCustomers(): Promise<Customer[]> {
    return this.deps.customers.list();
  }
}

export type { Role };

/**
 * The application row and its audit event; the secret is stored as its SHA-256 only. `actor`
 * and `clientAddress` name who made it (the operator's CLI by default).
 */
export async function insertApplication(
  repos: { readonly applications: Pick<ApplicationsRepo, 'create'>; readonly audit: Pick<AuditRepo, 'append'> },
  input: {
    customerId: CustomerId;
    userId: UserId;
    scopes: readonly Scope[];
    redirectUris?: readonly string[];
    name: string;
    clientSecret: string;
    now: number;
    actor?: string;
    clientAddress?: string | null;
  },
): Promise<Application> {
  const application = await repos.applications.create(
    {
      customerId: input.customerId,
      userId: input.userId,
      name: input.name,
      clientId: `cdc_${randomBytes(16).toString('hex')}`,
      secretHash: hashSecret(input.clientSecret),
      scopes: input.scopes,
      redirectUris: input.redirectUris ?? [],
    },
    input.now,
  );
  await repos.audit.append({
    at: input.now,
    customerId: input.customerId,
    actor: input.actor ?? 'operator',
    clientAddress: input.clientAddress ?? null,
    action: 'application.created',
    subject: `app:${application.clientId}`,
    details: { scopes: input.scopes },
  });
  return application;
}

async function freeUsername(users: UsersRepo, base: string): Promise<string> {
  let name = base;
  for (let i = 2; await users.usernameTaken(name); i++) name = `${base}-${i}`;
  return name;
}
