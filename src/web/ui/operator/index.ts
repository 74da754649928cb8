import type { App } from '../../types.js';
import type { OperatorPageDeps } from './common.js';
import { registerOperatorCustomers } from './customers.js';
import { registerOperatorSignIn } from './sign-in.js';
import { registerOperatorStatus } from './status.js';
import { registerOperatorVetting } from './vetting.js';

// The operator screens under /operator (docs/operators.md): their own sign-in and session, apart
// from customers' users; customers, vetting, CA status, mail outbox, failed jobs.

export type { OperatorPageDeps } from './common.js';

export function registerOperatorPages(app: App, deps: OperatorPageDeps): void {
  registerOperatorSignIn(app, deps);
  registerOperatorCustomers(app, deps);
  registerOperatorVetting(app, deps);
  registerOperatorStatus(app, deps);
}
