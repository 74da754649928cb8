import { Type } from 'typebox';
import { fromMinor } from '../../core/index.js';
import type { Accounts } from '../../ra/accounts/accounts.js';
import type { App } from '../types.js';
import { principalOf } from '../types.js';
import { bearer, okBody, responses } from './schemas.js';

const Limit = okBody({
  LimitInfo: Type.Object({ Limit: Type.Number(), Used: Type.Number() }),
});

/** GET /Limit (spec §4.2): credit limit and used amount in the account currency. */
export function registerLimit(app: App, deps: { accounts: Accounts }): void {
  app.get(
    '/Limit',
    {
      schema: {
        tags: ['account'],
        summary: 'Credit limit and used amount',
        security: bearer,
        response: responses(Limit),
      },
      config: { access: { area: 'limit', write: false } },
    },
    async (request) => {
      const customer = await deps.accounts.customer(principalOf(request));
      return {
        success: true as const,
        LimitInfo: {
          Limit: fromMinor(customer.creditLimitMinor, customer.currency),
          Used: fromMinor(customer.usedMinor, customer.currency),
        },
      };
    },
  );
}
