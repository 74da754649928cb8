import { Type } from 'typebox';
import type { EmailApprovals } from '../../ra/dcv/email-approval.js';
import type { App } from '../types.js';
import { principalOf } from '../types.js';
import { bearer, okBody, responses } from './schemas.js';

const write = { access: { area: 'orders', write: true } } as const;
const Params = Type.Object({ ServiceOrderID: Type.String({ pattern: '^[0-9]{1,10}$' }) });

/** PUT /ApproverEmail/{id} (change the approver) and POST /ApproverEmail/{id} (resend), spec §4.10–4.11. */
export function registerApproverEmail(app: App, deps: { emailApprovals: EmailApprovals }): void {
  app.put(
    '/ApproverEmail/:ServiceOrderID',
    {
      schema: {
        tags: ['dcv'],
        summary: 'Change the approver of a pending DV order',
        security: bearer,
        params: Params,
        querystring: Type.Object({ ApproverEmail: Type.String({ minLength: 3, maxLength: 320 }) }),
        response: responses(okBody({ Message: Type.String() })),
      },
      config: write,
    },
    async (request) => {
      await deps.emailApprovals.changeApprover(
        { principal: principalOf(request), clientAddress: request.ip },
        Number(request.params.ServiceOrderID),
        request.query.ApproverEmail,
      );
      return { success: true as const, Message: 'The approver was changed and the approval mail sent.' };
    },
  );

  app.post(
    '/ApproverEmail/:ServiceOrderID',
    {
      schema: {
        tags: ['dcv'],
        summary: 'Send the approval mail again',
        security: bearer,
        params: Params,
        response: responses(okBody({ Message: Type.String() })),
      },
      config: write,
    },
    async (request) => {
      await deps.emailApprovals.resend(
        { principal: principalOf(request), clientAddress: request.ip },
        Number(request.params.ServiceOrderID),
      );
      return { success: true as const, Message: 'The approval mail was sent again.' };
    },
  );
}
