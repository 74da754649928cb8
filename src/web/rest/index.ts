import type { Clock } from '../../core/index.js';
import type { Accounts } from '../../ra/accounts/accounts.js';
import type { DcvData } from '../../ra/dcv/dcv-data.js';
import type { EmailApprovals } from '../../ra/dcv/email-approval.js';
import type { Lifecycle } from '../../ra/orders/lifecycle.js';
import type { Reissues } from '../../ra/orders/reissues.js';
import type { OrderFlow } from '../../ra/issuance/order-flow.js';
import type { OrderReads } from '../../ra/orders/order-reads.js';
import type { Orders } from '../../ra/orders/orders.js';
import type { Users } from '../../ra/accounts/users.js';
import type { Applications } from '../../ra/accounts/applications.js';
import type { Shop } from '../../ra/catalog/shop.js';
import type { Tools } from '../../ra/tools/tools.js';
import type { Vouchers } from '../../ra/vouchers/vouchers.js';
import type { Assessments } from '../../ra/scans/assessments.js';
import type { App } from '../types.js';
import { registerApproverEmail } from './approver-email.js';
import { registerDcv } from './dcv.js';
import { registerLifecycle } from './lifecycle.js';
import { registerLimit } from './limit.js';
import { registerOrders } from './orders.js';
import { registerProducts } from './products.js';
import { registerProfile } from './profile.js';
import { registerQuote } from './quote.js';
import { registerTools } from './tools.js';
import { registerUsers } from './users.js';
import { registerApplications } from './applications.js';
import { registerVouchers } from './vouchers.js';
import { registerAssessments } from './assessments.js';
import { Failure } from './schemas.js';

export interface RestDeps {
  readonly accounts: Accounts;
  readonly shop: Shop;
  readonly tools: Tools;
  readonly orders: Orders;
  readonly orderReads: OrderReads;
  readonly users: Users;
  readonly applications: Applications;
  readonly dcvData: DcvData;
  readonly emailApprovals: EmailApprovals;
  readonly lifecycle: Lifecycle;
  readonly reissues: Reissues;
  readonly orderFlow: Pick<OrderFlow, 'checkNow'>;
  readonly vouchers: Vouchers;
  readonly assessments: Assessments;
  /** The service's clock, for times a route stamps itself (a refused order's Timestamp); the system's when not given. */
  readonly clock?: Clock;
}

/** The /rest/v1 API: one file per resource. */
export function registerRest(app: App, deps: RestDeps): void {
  app.addSchema(Failure);
  registerProfile(app);
  registerLimit(app, deps);
  registerProducts(app, deps);
  registerQuote(app, deps);
  registerTools(app, deps);
  registerOrders(app, deps);
  registerDcv(app, deps);
  registerApproverEmail(app, deps);
  registerLifecycle(app, deps);
  registerUsers(app, deps);
  registerApplications(app, deps);
  registerVouchers(app, deps);
  registerAssessments(app, deps);
}
