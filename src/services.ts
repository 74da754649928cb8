// Everything createServices (main.ts) builds, as one process holds it: the RA's services, the CA,
// the repositories the CLI and the worker use, and the shared Redis.
import type { Redis } from 'ioredis';
import type { BuiltinCa } from './ca/index.js';
import type { Config } from './config/index.js';
import type { Clock } from './core/index.js';
import type { Accounts } from './ra/accounts/accounts.js';
import type { Applications } from './ra/accounts/applications.js';
import type { OAuth } from './ra/accounts/oauth.js';
import type { SessionTokens } from './ra/accounts/session-tokens.js';
import type { SignIn } from './ra/accounts/sign-in.js';
import type { TwoFactor } from './ra/accounts/two-factor.js';
import type { Users } from './ra/accounts/users.js';
import type { CatalogService } from './ra/catalog/catalog.js';
import type { Shop } from './ra/catalog/shop.js';
import type { DcvData } from './ra/dcv/dcv-data.js';
import type { EmailApprovals } from './ra/dcv/email-approval.js';
import type { HashStore } from './ra/hash-store/hash-store.js';
import type { Housekeeping } from './ra/housekeeping/housekeeping.js';
import type { OrderFlow } from './ra/issuance/order-flow.js';
import type { Pki } from './ra/issuance/pki.js';
import type { Reconciliation } from './ra/issuance/reconciliation.js';
import type { Mailer } from './ra/mail/mail.js';
import type { Notifier } from './ra/mail/notify.js';
import type { OperatorConsole } from './ra/operators/operator-console.js';
import type { Operators } from './ra/operators/operators.js';
import type { Lifecycle } from './ra/orders/lifecycle.js';
import type { OrderReads } from './ra/orders/order-reads.js';
import type { Orders } from './ra/orders/orders.js';
import type { Reissues } from './ra/orders/reissues.js';
import type { Vetting } from './ra/orders/vetting.js';
import type { Assessments } from './ra/scans/assessments.js';
import type { Tools } from './ra/tools/tools.js';
import type { Vouchers } from './ra/vouchers/vouchers.js';
import type { Broadcast, Db, JobsRepo, MailRepo } from './storage/index.js';
import type { Metrics } from './web/ops/metrics.js';

export interface Services {
  readonly config: Config;
  readonly clock: Clock;
  readonly db: Db;
  readonly accounts: Accounts;
  readonly oauth: OAuth;
  readonly catalog: CatalogService;
  readonly shop: Shop;
  readonly tools: Tools;
  readonly metrics: Metrics;
  readonly jobs: JobsRepo;
  readonly housekeeping: Housekeeping;
  readonly hashStore: HashStore;
  readonly ca: BuiltinCa;
  readonly pki: Pki;
  readonly orders: Orders;
  readonly orderReads: OrderReads;
  readonly users: Users;
  readonly applications: Applications;
  readonly signIn: SignIn;
  readonly twoFactor: TwoFactor;
  readonly sessionTokens: SessionTokens;
  readonly orderFlow: OrderFlow;
  readonly dcvData: DcvData;
  readonly emailApprovals: EmailApprovals;
  readonly mailRepo: MailRepo;
  readonly mailer: Mailer;
  readonly vetting: Vetting;
  readonly operators: Operators;
  readonly operatorConsole: OperatorConsole;
  readonly lifecycle: Lifecycle;
  readonly reissues: Reissues;
  readonly vouchers: Vouchers;
  readonly assessments: Assessments;
  readonly notifier: Notifier;
  readonly reconciliation: Reconciliation;
  /** The shared Redis (CERTDESK_REDIS_URL), if any: the rate limiter's store. */
  readonly redis: Redis | undefined;
  /** How this process hears the others' changes (cache invalidation); /readyz reports whether it does. */
  readonly broadcast: Broadcast;
  close(): Promise<void>;
}
