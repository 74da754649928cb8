import { Type } from 'typebox';
import { amountOf, formatTimestamp, roleAllows, scopeAllows, systemClock, type Clock } from '../../core/index.js';
import { maskedCode } from '../../ra/vouchers/voucher-codes.js';
import type { OwnedVoucher, Vouchers } from '../../ra/vouchers/vouchers.js';
import type { App } from '../types.js';
import { principalOf } from '../types.js';
import { includes, orderIds, orderInfo, type IncludeQuery } from './order-info.js';
import { Include, OrderBody, OrderInfo, OrderParametersOut, PlacedOrder } from './order-schemas.js';
import { orderAnswer, placingResponses, refusedOrderHook } from './orders.js';
import { bearer, okBody, responses } from './schemas.js';

const read = { access: { area: 'vouchers', write: false } } as const;
const write = { access: { area: 'vouchers', write: true } } as const;
const anonymous = { access: 'anonymous' } as const;

const Code = Type.String({
  minLength: 1,
  maxLength: 64,
  description: 'The voucher code, in any case, dashes optional',
});
const CodeParams = Type.Object({ VoucherCode: Code });
// The spec's literal `*` segment (§4.33, §4.34): a parameter that matches only `*`.
const StarParams = Type.Object({ star: Type.Literal('*'), VoucherCode: Code });

const count = (description: string) => Type.Optional(Type.Union([Type.Integer(), Type.Literal('')], { description }));

/** POST /Voucher's body (spec §4.28): the terms of the order the voucher pays for. */
const VoucherBody = Type.Object(
  {
    OrderParameters: Type.Object(
      {
        ProductCode: Type.Optional(
          Type.String({ maxLength: 100, description: 'Required: a TLS product from /Products' }),
        ),
        ServerCount: count('Default 1; required on license-priced products'),
        SubjectAltNameCount: count('Non-wildcard SAN hosts the redeemer may name (default 0)'),
        ValidityPeriod: Type.Optional(
          Type.Integer({ description: 'Required: months (12 or 24), or days on the free automated DV product' }),
        ),
        PartnerOrderID: Type.Optional(
          Type.Union([Type.String({ maxLength: 200 }), Type.Null()], {
            description:
              'Your reference, 1-64 printable characters; the redeemed order carries it. Generated when omitted. A retry with the same one and the same terms returns the voucher made first',
          }),
        ),
      },
      { additionalProperties: true },
    ),
  },
  { additionalProperties: true },
);

const Terms = {
  ProductCode: Type.String(),
  ServerCount: Type.Integer(),
  SubjectAltNameCount: Type.Integer(),
  ValidityPeriod: Type.Integer(),
};
const OwnedTerms = Type.Object({
  ...Terms,
  Price: Type.Number({ description: 'The reserved price, charged when the voucher is redeemed' }),
  Currency: Type.String(),
  PartnerOrderID: Type.String(),
});
const VoucherOut = Type.Object({
  VoucherCode: Type.String(),
  Redeemed: Type.Boolean(),
  CreationDate: Type.String(),
  OrderParameters: OwnedTerms,
  RedeemInfo: Type.Optional(
    Type.Object({
      RedeemDate: Type.String(),
      ServiceOrderID: Type.Integer(),
      CertCenterOrderID: Type.Integer(),
    }),
  ),
});

/** The order a redemption answers with: POST /Order's shape, without the seller's PartnerOrderID. */
const RedeemedOrder = Type.Object(
  {
    ...PlacedOrder.properties,
    OrderParameters: Type.Object(
      { ...OrderParametersOut.properties, PartnerOrderID: Type.Optional(Type.String()) },
      { additionalProperties: true },
    ),
  },
  { description: "POST /Order's answer without the seller's PartnerOrderID" },
);

/** Anonymous failures: the envelope, with 429 for too many unknown codes. */
const anonymousResponses = (ok: Parameters<typeof responses>[0]) => {
  const { 401: _u, 403: _f, ...rest } = responses(ok);
  return rest;
};

/**
 * The voucher endpoints (spec §4.28–4.34): made, listed and voided by their owner (scope voucher,
 * role VOUCHERS or ADMIN); looked at, redeemed and collected anonymously with the code.
 */
export function registerVouchers(app: App, deps: { vouchers: Vouchers; clock?: Clock }): void {
  app.post(
    '/Voucher',
    {
      schema: {
        tags: ['vouchers'],
        summary: 'Make a voucher',
        security: bearer,
        description:
          'Spec 4.28. Priced like /Quote; the price is reserved against the credit limit (Used rises) and charged when the voucher is redeemed.',
        body: VoucherBody,
        response: responses(okBody({ VoucherCode: Type.String(), OrderParameters: OwnedTerms })),
      },
      config: write,
    },
    async (request) => {
      const made = await deps.vouchers.create(
        { principal: principalOf(request), clientAddress: request.ip },
        request.body,
      );
      const { VoucherCode, OrderParameters } = voucherOut(made, true);
      return { success: true as const, VoucherCode, OrderParameters };
    },
  );

  app.get(
    '/Vouchers',
    {
      schema: {
        tags: ['vouchers'],
        summary: "The account's vouchers",
        security: bearer,
        description: 'Spec 4.30. Newest first; voided vouchers are not listed.',
        response: responses(okBody({ Vouchers: Type.Array(VoucherOut) })),
      },
      config: read,
    },
    async (request) => {
      const principal = principalOf(request);
      // A code is money: readers who may not make or void vouchers see it masked.
      const reveal = scopeAllows(principal.scopes, write.access) && roleAllows(principal.roles, write.access);
      return {
        success: true as const,
        Vouchers: (await deps.vouchers.list(principal)).map((v) => voucherOut(v, reveal)),
      };
    },
  );

  app.get<{ Params: { VoucherCode: string } }>(
    '/Voucher/:VoucherCode',
    {
      schema: {
        tags: ['vouchers'],
        summary: 'One voucher of the account',
        security: bearer,
        description: "Spec 4.31. Another account's, a voided or an unknown code: ErrorId -2011.",
        params: CodeParams,
        response: responses(okBody({ Vouchers: Type.Array(VoucherOut) })),
      },
      config: read,
    },
    async (request) => ({
      success: true as const,
      // The caller named the code: it is shown as it is.
      Vouchers: [voucherOut(await deps.vouchers.get(principalOf(request), request.params.VoucherCode), true)],
    }),
  );

  app.delete<{ Params: { VoucherCode: string } }>(
    '/Voucher/:VoucherCode',
    {
      schema: {
        tags: ['vouchers'],
        summary: 'Void a voucher',
        security: bearer,
        description:
          'Spec 4.32. Voids an unredeemed voucher and releases its reservation. Redeemed, voided, unknown or another account’s: ErrorId 403, nothing changes.',
        params: CodeParams,
        response: responses(okBody({ Message: Type.String() })),
      },
      config: write,
    },
    async (request) => {
      await deps.vouchers.void(
        { principal: principalOf(request), clientAddress: request.ip },
        request.params.VoucherCode,
      );
      return { success: true as const, Message: 'The voucher is voided; its reservation is released.' };
    },
  );

  app.get<{ Params: { star: '*'; VoucherCode: string } }>(
    '/Voucher/:star(^\\*$)/:VoucherCode',
    {
      schema: {
        tags: ['vouchers'],
        summary: 'What a voucher pays for (no token)',
        description:
          'Spec 4.33, the path GET /Voucher/*/{VoucherCode}. Only the terms: no price, currency, owner or status. Unknown, voided and redeemed codes get the same ErrorId -2011; failed lookups are rate-limited per address (docs/vouchers.md).',
        params: StarParams,
        response: anonymousResponses(
          okBody({ Vouchers: Type.Array(Type.Object({ OrderParameters: Type.Object(Terms) })) }),
        ),
      },
      config: anonymous,
    },
    async (request) => {
      const terms = await deps.vouchers.terms(request.params.VoucherCode, request.ip);
      return {
        success: true as const,
        Vouchers: [
          {
            OrderParameters: {
              ProductCode: terms.product.code,
              ServerCount: terms.serverCount,
              SubjectAltNameCount: terms.subjectAltNameCount,
              ValidityPeriod: terms.validityPeriod,
            },
          },
        ],
      };
    },
  );

  app.post(
    '/Redeem',
    {
      schema: {
        tags: ['vouchers'],
        summary: 'Redeem a voucher (no token)',
        description:
          "Spec 4.29. POST /Order's body plus VoucherCode; ProductCode must be the voucher's, names, servers and validity within what it paid for. The order belongs to the voucher's owner and is charged the reserved price once. A retry of a redemption that succeeded (the same body) answers with its order.",
        body: Type.Object(
          { ...OrderBody.properties, VoucherCode: Type.Optional(Code) },
          { additionalProperties: true },
        ),
        response: placingResponses(anonymousResponses(RedeemedOrder)),
      },
      config: anonymous,
      // A refused redemption answers like a refused order (spec §4.29: POST /Order's shape).
      preSerialization: refusedOrderHook(deps.clock ?? systemClock),
    },
    async (request) => {
      const placed = await deps.vouchers.redeem(request.body, request.ip);
      const { PartnerOrderID: _seller, ...parameters } = placed.order.parameters;
      return orderAnswer(placed.order.id, placed.order.orderDate, parameters as typeof placed.order.parameters, placed);
    },
  );

  app.get<{ Params: { star: '*'; VoucherCode: string }; Querystring: IncludeQuery }>(
    '/Order/:star(^\\*$)/:VoucherCode',
    {
      schema: {
        tags: ['vouchers'],
        summary: 'The order a voucher was redeemed for (no token)',
        description:
          "Spec 4.34, the path GET /Order/*/{VoucherCode}. GET /Order/{id}'s shape, Fulfillment included once issued (includeFulfillment=false leaves it out); never billing or contact details.",
        params: StarParams,
        querystring: Type.Object(Include),
        response: anonymousResponses(okBody({ OrderInfo })),
      },
      config: anonymous,
    },
    async (request) => {
      const view = await deps.vouchers.redeemedOrder(request.params.VoucherCode, request.ip);
      const asked = includes(request.query);
      const info = orderInfo(view, {
        ...asked,
        fulfillment: request.query.includeFulfillment === undefined || asked.fulfillment,
        billing: false,
        contacts: false,
      });
      const parameters = info.OrderParameters as Record<string, unknown> | undefined;
      if (parameters !== undefined) delete parameters.PartnerOrderID;
      return { success: true as const, OrderInfo: info };
    },
  );
}

/** A voucher as its owner sees it (spec 2.13), with RedeemInfo once redeemed; the code masked unless `reveal`. */
function voucherOut({ voucher, code }: OwnedVoucher, reveal: boolean) {
  return {
    VoucherCode: reveal ? code : maskedCode(code),
    Redeemed: voucher.status === 'redeemed',
    CreationDate: formatTimestamp(voucher.createdAt)!,
    OrderParameters: {
      ProductCode: voucher.product.code,
      ServerCount: voucher.serverCount,
      SubjectAltNameCount: voucher.subjectAltNameCount,
      ValidityPeriod: voucher.validityPeriod,
      Price: amountOf(voucher.price),
      Currency: voucher.price.currency,
      PartnerOrderID: voucher.partnerOrderId,
    },
    ...(voucher.status === 'redeemed' && voucher.orderId !== null && voucher.redeemedAt !== null
      ? { RedeemInfo: { RedeemDate: formatTimestamp(voucher.redeemedAt)!, ...orderIds(voucher.orderId) } }
      : {}),
  };
}
