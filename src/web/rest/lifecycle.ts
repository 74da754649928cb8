import { Type } from 'typebox';
import { MAX_IDEMPOTENCY_KEY, type Lifecycle } from '../../ra/orders/lifecycle.js';
import type { Reissues } from '../../ra/orders/reissues.js';
import type { OrderFlow } from '../../ra/issuance/order-flow.js';
import { CertdeskError, formatTimestamp } from '../../core/index.js';
import type { App } from '../types.js';
import { principalOf } from '../types.js';
import { bearer, okBody, responses } from './schemas.js';

const write = { access: { area: 'orders', write: true } } as const;
const Params = Type.Object({ ServiceOrderID: Type.String({ pattern: '^[0-9]{1,10}$' }) });

/** DELETE /Order/{id} (cancel, spec §4.15) and DELETE /Revoke/{id} (spec §4.17). */
export function registerLifecycle(
  app: App,
  deps: { lifecycle: Lifecycle; reissues: Reissues; orderFlow: Pick<OrderFlow, 'checkNow'> },
): void {
  app.post(
    '/CheckDCV/:ServiceOrderID',
    {
      schema: {
        tags: ['orders'],
        summary: 'Check domain control now (certdesk extension)',
        security: bearer,
        params: Params,
        description:
          "Checks the order's pending DNS and FILE names at once (the worker checks on its own schedule: after 1, then 5, then 30 minutes …) " +
          "and moves the order on when every name is shown; a DV order is then issued. GET /Order/{id}?includeDCVStatus=true shows each name's result. " +
          'An order that waits for nothing is left as it is.',
        response: responses(okBody({ Message: Type.String() })),
      },
      config: write,
    },
    async (request) => {
      await deps.orderFlow.checkNow(principalOf(request), Number(request.params.ServiceOrderID));
      return { success: true as const, Message: 'Checked.' };
    },
  );

  app.delete(
    '/Order/:ServiceOrderID',
    {
      schema: {
        tags: ['orders'],
        summary: 'Cancel an order',
        security: bearer,
        params: Params,
        description:
          'Cancels the order (refund rules: spec 3.1). Cancelling a cancelled order is refused (409, ErrorId -2011), unless the request ' +
          'carries the Idempotency-Key of the request that cancelled it: a retry after a lost response gets the same answer again and changes nothing.',
        headers: Type.Object({
          'idempotency-key': Type.Optional(
            Type.String({
              minLength: 1,
              maxLength: MAX_IDEMPOTENCY_KEY,
              description:
                'Any client-chosen token (a UUID, say), compared exactly as sent, for this customer and order only. At most 255 characters (longer: 417).',
            }),
          ),
        }),
        response: responses(okBody({ Message: Type.String() })),
      },
      config: write,
    },
    async (request, reply) => {
      const key = request.headers['idempotency-key'];
      const r = await deps.lifecycle.cancel(
        { principal: principalOf(request), clientAddress: request.ip },
        Number(request.params.ServiceOrderID),
        key === undefined ? {} : { idempotencyKey: key },
      );
      // As Stripe's API does: a client can tell a replayed answer from a first one if it cares.
      if (r.replayed) void reply.header('idempotent-replayed', 'true');
      return {
        success: true as const,
        Message: r.refunded
          ? 'The order was cancelled and refunded.'
          : 'The order was cancelled; it is charged (cancelled more than 30 days after issuance).',
      };
    },
  );

  app.post(
    '/Reissue',
    {
      schema: {
        tags: ['orders'],
        summary: 'Reissue the certificate of an order',
        security: bearer,
        body: Type.Object(
          {
            ServiceOrderID: Type.Union([
              Type.Integer({ minimum: 1, maximum: 2_147_483_647 }),
              Type.String({ pattern: '^[0-9]{1,10}$' }),
            ]),
          },
          { additionalProperties: true },
        ),
        response: responses(okBody({ Message: Type.String() })),
      },
      config: write,
    },
    async (request) => {
      const body = request.body as {
        ServiceOrderID: number | string;
        OrderParameters?: unknown;
        ReissueEmail?: unknown;
      };
      const params =
        typeof body.OrderParameters === 'object' &&
        body.OrderParameters !== null &&
        !Array.isArray(body.OrderParameters)
          ? (body.OrderParameters as Record<string, unknown>)
          : undefined;
      await deps.reissues.reissue(
        { principal: principalOf(request), clientAddress: request.ip },
        Number(body.ServiceOrderID),
        { ...(params === undefined ? {} : { OrderParameters: params }), ReissueEmail: body.ReissueEmail },
      );
      return {
        success: true as const,
        Message: 'The reissue was started; the current certificate stays valid until the new one is issued.',
      };
    },
  );

  // RevokeReason and Certificate come in the JSON body (the spec's examples) or the query (its reference).
  const RevokeFields = {
    RevokeReason: Type.Optional(Type.String({ maxLength: 1000 })),
    Certificate: Type.Optional(Type.String({ maxLength: 65_536 })),
  };
  app.delete(
    '/Revoke/:ServiceOrderID',
    {
      schema: {
        tags: ['orders'],
        summary: 'Revoke a certificate of an order',
        security: bearer,
        params: Params,
        description:
          'Revokes the certificate at once (CRL and OCSP). A revoked certificate can be revoked again only to change its reason to keyCompromise ' +
          '(its revocation date stays); any other repeat is refused with 409, ErrorId -2011, ErrorField Certificate, and changes nothing.',
        // No body schema: a DELETE often has none, and the members may come in the query instead.
        querystring: Type.Object(RevokeFields),
        response: responses(okBody({ Message: Type.String() })),
      },
      config: write,
    },
    async (request) => {
      const raw =
        typeof request.body === 'object' && request.body !== null ? (request.body as Record<string, unknown>) : {};
      const member = (name: 'RevokeReason' | 'Certificate') =>
        typeof raw[name] === 'string' ? (raw[name] as string) : request.query[name];
      const reason = member('RevokeReason');
      const certificate = member('Certificate');
      const faults = [
        ...(reason === undefined || reason.trim() === ''
          ? [{ kind: 'invalidInput' as const, field: 'RevokeReason', message: 'RevokeReason is required.' }]
          : []),
        ...(certificate === undefined || certificate.trim() === ''
          ? [{ kind: 'invalidInput' as const, field: 'Certificate', message: 'Certificate (PEM) is required.' }]
          : []),
      ];
      if (faults.length > 0) throw CertdeskError.ofFaults(faults);
      const r = await deps.lifecycle.revoke(
        { principal: principalOf(request), clientAddress: request.ip },
        Number(request.params.ServiceOrderID),
        certificate!,
        reason!,
      );
      if (r.escalatedFrom !== undefined) {
        return {
          success: true as const,
          Message: `The revocation reason of certificate ${r.serial} was changed from ${r.escalatedFrom} to ${r.reason}; it stays revoked since ${formatTimestamp(r.revokedAt)}${r.refunded ? ', and the order was refunded' : ''}.`,
        };
      }
      return {
        success: true as const,
        Message: `Certificate ${r.serial} was revoked (${r.reason})${r.refunded ? ' and the order refunded' : ''}.`,
      };
    },
  );
}
