import type { Transact } from '../core/index.js';
import { ApplicationsRepo } from './applications-repo.js';
import { AuditRepo } from './audit-repo.js';
import { CaRepo } from './ca-repo.js';
import { CustomersRepo } from './customers-repo.js';
import { inTransaction, type Db } from './database.js';
import { DcvValuesRepo } from './dcv-values-repo.js';
import { JobsRepo } from './jobs-repo.js';
import { KvRepo } from './kv-repo.js';
import { MailRepo } from './mail-repo.js';
import { OrderCertificatesRepo } from './order-certificates-repo.js';
import { OrderNamesRepo } from './order-names-repo.js';
import { OrderQueriesRepo } from './order-queries-repo.js';
import { OauthCodesRepo } from './oauth-codes-repo.js';
import { OrdersRepo } from './orders-repo.js';
import { ExpiredRows } from './purge.js';
import { TokensRepo } from './tokens-repo.js';
import { SignInFailuresRepo } from './sign-in-failures-repo.js';
import { TwoFactorRepo } from './two-factor-repo.js';
import { UsersRepo } from './users-repo.js';
import { VouchersRepo } from './vouchers-repo.js';
import { ScansRepo } from './scans-repo.js';
import { WebSessionsRepo } from './web-sessions-repo.js';

/** One repository per aggregate, all on the same database or the same transaction. */
export interface Repositories {
  readonly applications: ApplicationsRepo;
  readonly audit: AuditRepo;
  readonly ca: CaRepo;
  readonly customers: CustomersRepo;
  readonly dcvValues: DcvValuesRepo;
  readonly expired: ExpiredRows;
  readonly jobs: JobsRepo;
  readonly kv: KvRepo;
  readonly mail: MailRepo;
  readonly orders: OrdersRepo;
  readonly orderCertificates: OrderCertificatesRepo;
  readonly orderNames: OrderNamesRepo;
  readonly orderQueries: OrderQueriesRepo;
  readonly tokens: TokensRepo;
  readonly users: UsersRepo;
  readonly oauthCodes: OauthCodesRepo;
  readonly webSessions: WebSessionsRepo;
  readonly twoFactor: TwoFactorRepo;
  readonly signInFailures: SignInFailuresRepo;
  readonly vouchers: VouchersRepo;
  readonly scans: ScansRepo;
}

/** Every repository over `db` (the database, or a transaction's view of it). Cheap: plain objects. */
export function repositories(db: Db): Repositories {
  return {
    applications: new ApplicationsRepo(db),
    audit: new AuditRepo(db),
    ca: new CaRepo(db),
    customers: new CustomersRepo(db),
    dcvValues: new DcvValuesRepo(db),
    expired: new ExpiredRows(db),
    jobs: new JobsRepo(db),
    kv: new KvRepo(db),
    mail: new MailRepo(db),
    orders: new OrdersRepo(db),
    orderCertificates: new OrderCertificatesRepo(db),
    orderNames: new OrderNamesRepo(db),
    orderQueries: new OrderQueriesRepo(db),
    tokens: new TokensRepo(db),
    users: new UsersRepo(db),
    oauthCodes: new OauthCodesRepo(db),
    webSessions: new WebSessionsRepo(db),
    twoFactor: new TwoFactorRepo(db),
    signInFailures: new SignInFailuresRepo(db),
    vouchers: new VouchersRepo(db),
    scans: new ScansRepo(db),
  };
}

/**
 * The unit of work: runs `fn` in one transaction with every repository bound to it, so that what
 * `fn` changes commits together or not at all. A component declares the repositories it needs
 * (`(repos: Pick<Repositories, 'orders' | 'audit'>) => …`) and is handed this function.
 */
export type UnitOfWork = Transact<Repositories>;

export function unitOfWork(db: Db): UnitOfWork {
  return (fn, options) => inTransaction(db, (tx) => fn(repositories(tx)), options);
}
