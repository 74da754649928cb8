import type { Accounts } from '../../ra/accounts.js';
import type { DcvData } from '../../ra/dcv-data.js';
import type { EmailApprovals } from '../../ra/email-approval.js';
import type { Lifecycle } from '../../ra/lifecycle.js';
import type { Orders } from '../../ra/orders.js';
import type { Shop } from '../../ra/shop.js';
import type { Tools } from '../../ra/tools.js';
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
import { Failure } from './schemas.js';

export interface RestDeps {
  readonly accounts: Accounts;
  readonly shop: Shop;
  readonly tools: Tools;
  readonly orders: Orders;
  readonly dcvData: DcvData;
  readonly emailApprovals: EmailApprovals;
  readonly lifecycle: Lifecycle;
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
}
