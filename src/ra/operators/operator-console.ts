import {
  CertdeskError,
  currencyDecimals,
  customerId as toCustomerId,
  jobId as toJobId,
  type Clock,
  type Customer,
  type Order,
  type OrderName,
  type VettedData,
} from '../../core/index.js';
import type { BuiltinCa } from '../../ca/index.js';
import type { AuditRepo, CaRepo, CustomersRepo, JobsRepo, MailRepo, MailRow, StoredJob } from '../../storage/index.js';
import type { Accounts, CreatedCustomer } from '../accounts/accounts.js';
import type { PrincipalCache } from '../accounts/principal-cache.js';
import type { Vetting } from '../orders/vetting.js';

// What operators do in the web interface: customers (create, credit limit, suspension), the
// vetting of OV/EV orders, the CA's status, the mail outbox and failed jobs. Every change is one
// guarded update and an audit event naming the operator (`operator:<username>`).

/** Who acts: the signed-in operator and the address the request came from. */
export interface OperatorActor {
  readonly username: string;
  readonly clientAddress: string | null;
}

/** One CA certificate as the CA screen shows it, with its key's current CRL. */
export interface CaStatusRow {
  readonly id: string;
  readonly brand: string;
  readonly role: string;
  readonly keyId: string;
  readonly keyType: string;
  readonly notAfter: number;
  readonly distrust: { phase1: number | null; phase2: number | null } | null;
  readonly crl: { thisUpdate: number; nextUpdate: number } | null;
}

export interface OperatorConsoleDeps {
  readonly accounts: Pick<Accounts, 'createCustomer'>;
  readonly customers: Pick<CustomersRepo, 'byId' | 'listWithSuspension' | 'setCreditLimit' | 'suspend' | 'unsuspend'>;
  readonly principals: Pick<PrincipalCache, 'clear'>;
  readonly vetting: Pick<Vetting, 'list' | 'approve' | 'reject'>;
  readonly ca: Pick<BuiltinCa, 'list'>;
  readonly caRepo: Pick<CaRepo, 'crl'>;
  readonly mail: Pick<MailRepo, 'list'>;
  readonly jobs: Pick<JobsRepo, 'byId' | 'listDead' | 'retryDead'>;
  readonly audit: Pick<AuditRepo, 'append'>;
  readonly clock: Clock;
}

const MAIL_LIMIT = 50;
const JOB_LIMIT = 100;

export class OperatorConsole {
  constructor(private readonly deps: OperatorConsoleDeps) {}

  /** Every customer with its suspension (null: not suspended), by id. */
  customers(): Promise<{ customer: Customer; suspendedAt: number | null }[]> {
    return this.deps.customers.listWithSuspension();
  }

  /**
   * Registers a customer (Accounts.createCustomer: an ADMIN user and an API application; the
   * password and client secret are returned once). `creditLimit` is the form's text. Throws
   * invalidInput as createCustomer does.
   */
  async createCustomer(
    actor: OperatorActor,
    input: { name: string; email: string; currency: string; creditLimit: string; country: string },
  ): Promise<CreatedCustomer> {
    const currency = input.currency.trim().toUpperCase();
    const created = await this.deps.accounts.createCustomer({
      name: input.name,
      email: input.email.trim(),
      currency,
      creditLimit: parseAmount(input.creditLimit, currency),
      country: input.country.trim().toUpperCase() || 'US',
    });
    await this.audit(actor, created.customer.id, 'operator.customer-created', `customer:${created.customer.id}`);
    return created;
  }

  /**
   * Sets a customer's credit limit from the form's text, guarded by the limit the operator saw
   * (`wasMinor`). Throws invalidInput (not an amount ≥ 0), notFound, or conflict (changed meanwhile).
   */
  async setCreditLimit(actor: OperatorActor, id: number, wasMinor: number, amount: string): Promise<Customer> {
    const customer = await this.customer(id);
    const minor = Math.round(parseAmount(amount, customer.currency) * 10 ** currencyDecimals(customer.currency));
    if (!(await this.deps.customers.setCreditLimit(customer.id, wasMinor, minor, this.deps.clock.nowSeconds())))
      throw new CertdeskError('conflict', `The credit limit of customer ${id} was changed meanwhile: nothing changed.`);
    await this.audit(actor, customer.id, 'operator.credit-limit-set', `customer:${id}`, { from: wasMinor, to: minor });
    return (await this.deps.customers.byId(customer.id))!;
  }

  /**
   * Suspends a customer (`on`) or lifts its suspension: its bearer tokens and its users' sign-ins
   * are refused while suspended (storage's queries), at once in this process (the principal cache
   * is cleared). Throws notFound, or conflict when it already is as asked.
   */
  async setSuspended(actor: OperatorActor, id: number, on: boolean): Promise<void> {
    const customer = await this.customer(id);
    const now = this.deps.clock.nowSeconds();
    const changed = on
      ? await this.deps.customers.suspend(customer.id, now)
      : await this.deps.customers.unsuspend(customer.id, now);
    if (!changed)
      throw new CertdeskError('conflict', `Customer ${id} is ${on ? 'already' : 'not'} suspended: nothing changed.`);
    await this.deps.principals.clear();
    await this.audit(
      actor,
      customer.id,
      on ? 'operator.customer-suspended' : 'operator.customer-unsuspended',
      `customer:${id}`,
    );
  }

  /** OV/EV orders waiting for vetting, oldest first, with their names. */
  vettingQueue(): Promise<{ order: Order; names: OrderName[] }[]> {
    return this.deps.vetting.list();
  }

  /** Vetting.approve in the operator's name: throws as it does. */
  approve(actor: OperatorActor, orderId: number, vetted: VettedData): Promise<Order> {
    return this.deps.vetting.approve(orderId, vetted, `operator:${actor.username}`);
  }

  /** Vetting.reject in the operator's name: throws as it does (invalidInput without a reason). */
  reject(actor: OperatorActor, orderId: number, reason: string): Promise<Order> {
    return this.deps.vetting.reject(orderId, reason.trim(), `operator:${actor.username}`);
  }

  /** The CA certificates (issuers, keys, expiry, distrust marks), each with its key's current CRL. */
  async caStatus(): Promise<CaStatusRow[]> {
    const crls = new Map<string, CaStatusRow['crl']>();
    const rows: CaStatusRow[] = [];
    for (const c of this.deps.ca.list()) {
      if (!crls.has(c.keyId)) {
        const crl = await this.deps.caRepo.crl(c.keyId);
        crls.set(c.keyId, crl === undefined ? null : { thisUpdate: crl.thisUpdate, nextUpdate: crl.nextUpdate });
      }
      rows.push({
        id: c.id,
        brand: c.brand,
        role: c.role,
        keyId: c.keyId,
        keyType: c.keyType === 'rsa' ? `RSA-${c.bits}` : `ECDSA P-${c.bits}`,
        notAfter: c.notAfter,
        distrust: c.distrust,
        crl: crls.get(c.keyId) ?? null,
      });
    }
    return rows;
  }

  /** The newest mails of the outbox (at most 50), of one order when given. */
  mail(orderId?: number): Promise<MailRow[]> {
    return this.deps.mail.list({ limit: MAIL_LIMIT, ...(orderId === undefined ? {} : { orderId }) });
  }

  /** Jobs the worker gave up on, the most recently failed first (at most 100). */
  deadJobs(): Promise<StoredJob[]> {
    return this.deps.jobs.listDead(JOB_LIMIT);
  }

  /**
   * Queues a dead job again (attempts from zero, due now). Throws notFound, or conflict when the
   * job is not dead — already retried (also by a retry racing this one) or never failed.
   */
  async retryJob(actor: OperatorActor, id: number): Promise<void> {
    const job = await this.deps.jobs.byId(toJobId(id));
    if (job === undefined) throw new CertdeskError('notFound', `No job ${id}.`);
    if (!(await this.deps.jobs.retryDead(job.id, this.deps.clock.nowSeconds()))) {
      const now = await this.deps.jobs.byId(job.id);
      throw new CertdeskError('conflict', `Job ${id} is not dead (it is ${now?.status ?? 'gone'}): nothing changed.`);
    }
    await this.audit(actor, null, 'operator.job-retried', `job:${id}`, { name: job.name });
  }

  private async customer(id: number): Promise<Customer> {
    const customer = Number.isSafeInteger(id) && id > 0 ? await this.deps.customers.byId(toCustomerId(id)) : undefined;
    if (customer === undefined) throw new CertdeskError('notFound', `No customer ${id}.`);
    return customer;
  }

  private audit(
    actor: OperatorActor,
    customerId: Customer['id'] | null,
    action: string,
    subject: string,
    details?: Record<string, unknown>,
  ) {
    return this.deps.audit.append({
      at: this.deps.clock.nowSeconds(),
      customerId,
      actor: `operator:${actor.username}`,
      clientAddress: actor.clientAddress,
      action,
      subject,
      ...(details === undefined ? {} : { details }),
    });
  }
}

/** An amount typed by an operator: digits, at most the currency's decimals, ≥ 0. Throws invalidInput. */
export function parseAmount(text: string, currency: string): number {
  const decimals = currencyDecimals(currency);
  const pattern = decimals === 0 ? /^\d{1,12}$/ : new RegExp(`^\\d{1,12}(\\.\\d{1,${decimals}})?$`);
  const t = text.trim();
  if (!pattern.test(t))
    throw new CertdeskError(
      'invalidInput',
      `Credit limit: "${t.slice(0, 40)}" is not an amount ≥ 0 in ${currency} (digits${decimals === 0 ? '' : `, at most ${decimals} decimals`}, e.g. 5000).`,
      { field: 'credit-limit' },
    );
  return Number(t);
}
