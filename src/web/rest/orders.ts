import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import { CertdeskError, formatTimestamp, parseStatusFilter, parseTimestamp, progressOf, type MajorStatus, type MinorStatus } from '../../core/index.js';
import { DEFAULT_ITEMS_PER_PAGE, MAX_ITEMS_PER_PAGE, type OrderInput, type OrderView, type Orders } from '../../ra/orders.js';
import { parseBoolish } from '../compat.js';
import { failure, toCertdeskError } from '../envelope.js';
import type { App } from '../types.js';
import { principalOf } from '../types.js';
import { Boolish, bearer, okBody, responses } from './schemas.js';

const read = { access: { area: 'orders', write: false } } as const;
const write = { access: { area: 'orders', write: true } } as const;

const Include = {
  includeFulfillment: Type.Optional(Boolish),
  includeOrderParameters: Type.Optional(Boolish),
  includeBillingDetails: Type.Optional(Boolish),
  includeContacts: Type.Optional(Boolish),
  includeOrganizationInfos: Type.Optional(Boolish),
  includeDCVStatus: Type.Optional(Boolish),
};
type IncludeQuery = { [K in keyof typeof Include]?: string };

/** OrderInfo (spec 2.11) is open-ended: its blocks appear by the include* flags. */
const OrderInfo = Type.Object({}, { additionalProperties: true, description: 'Spec 2.11; blocks by the include* flags' });

const OrderFailure = Type.Object(
  {
    success: Type.Literal(false), Message: Type.String(), ErrorId: Type.Integer(), ErrorField: Type.Optional(Type.String()),
    Errors: Type.Optional(Type.Array(Type.Object({ ErrorId: Type.Integer(), ErrorField: Type.Optional(Type.String()), Message: Type.String() }))),
    ServiceOrderID: Type.Optional(Type.Integer()), Timestamp: Type.Optional(Type.String()),
  },
  { description: 'Failure of POST /Order: every fault in Errors, ServiceOrderID 0' },
);

/** POST /Order, GET /Order/{id}, GET /Orders, GET /ModifiedOrders (spec §4.9, §4.12–4.14). */
export function registerOrders(app: App, deps: { orders: Orders }): void {
  app.post(
    '/Order',
    {
      schema: {
        tags: ['orders'], summary: 'Place an order', security: bearer,
        body: Type.Object({ OrderParameters: Type.Optional(Type.Unknown()) }, { additionalProperties: true }),
        response: {
          ...responses(Type.Object(
            { success: Type.Literal(true), ServiceOrderID: Type.Integer(), Timestamp: Type.String(), OrderParameters: Type.Object({}, { additionalProperties: true }) },
            { additionalProperties: true, description: 'ServiceOrderID, OrderParameters (with DCV details), Fulfillment when issued at once' },
          )),
          417: OrderFailure, 409: OrderFailure, 404: OrderFailure,
        },
      },
      config: write,
    },
    async (request, typedReply) => {
      // Success and failure bodies are built here (the failure carries ServiceOrderID 0), not by the type provider.
      const reply = typedReply as unknown as FastifyReply;
      const principal = principalOf(request);
      try {
        const placed = await deps.orders.placeOrder({ principal, clientAddress: request.ip }, request.body as OrderInput);
        const params = JSON.parse(placed.order.params_json) as Record<string, unknown>;
        return reply.send({
          success: true,
          Timestamp: formatTimestamp(placed.order.order_date),
          ServiceOrderID: placed.order.id,
          OrderParameters: {
            ...params,
            ...(placed.dns === undefined ? {} : { DNSAuthDetails: placed.dns }),
            ...(placed.file === undefined ? {} : { FileAuthDetails: placed.file }),
          },
          ...(placed.certificate === undefined ? {} : {
            Fulfillment: { Certificate: placed.certificate.certificate, Intermediate: placed.certificate.intermediate, Certificate_PKCS7: placed.certificate.pkcs7 },
          }),
        });
      } catch (e) {
        const err = toCertdeskError(e);
        if (err.kind === 'internal') throw e;
        const { status, body } = failure(err);
        return reply.code(status).send({ ...body, ServiceOrderID: 0, Timestamp: formatTimestamp(Math.floor(Date.now() / 1000)) });
      }
    },
  );

  app.get<{ Params: { ServiceOrderID: string }; Querystring: IncludeQuery }>(
    '/Order/:ServiceOrderID',
    {
      schema: {
        tags: ['orders'], summary: 'One order', security: bearer,
        params: Type.Object({ ServiceOrderID: Type.String({ pattern: '^[0-9]{1,10}$' }) }),
        querystring: Type.Object(Include),
        response: responses(okBody({ OrderInfo })),
      },
      config: read,
    },
    async (request) => {
      const id = Number(request.params.ServiceOrderID);
      if (!Number.isSafeInteger(id) || id < 1 || id > 2_147_483_647) throw new CertdeskError('orderNotFound', undefined, { field: 'ServiceOrderID' });
      const inc = includes(request.query);
      const view = await deps.orders.getOrder(principalOf(request), id, inc.fulfillment);
      return { success: true as const, OrderInfo: orderInfo(view, inc) };
    },
  );

  app.get<{ Querystring: IncludeQuery & Record<string, string | undefined> }>(
    '/Orders',
    {
      schema: {
        tags: ['orders'], summary: 'Search orders', security: bearer,
        querystring: Type.Object({
          Status: Type.Optional(Type.String({ maxLength: 200 })),
          ProductType: Type.Optional(Type.String({ maxLength: 100 })),
          CommonName: Type.Optional(Type.String({ maxLength: 300 })),
          Page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
          ItemsPerPage: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_ITEMS_PER_PAGE, description: `Default ${DEFAULT_ITEMS_PER_PAGE}, at most ${MAX_ITEMS_PER_PAGE}` })),
          OrderBy: Type.Optional(Type.Union([Type.Literal('ServiceOrderID'), Type.Literal('OrderDate'), Type.Literal('UpdateDate'), Type.Literal('CommonName')])),
          OrderDir: Type.Optional(Type.String({ pattern: '^([Aa][Ss][Cc]|[Dd][Ee][Ss][Cc])$' })),
          filterScheduledToReplace: Type.Optional(Boolish),
          ...Include,
        }),
        response: responses(okBody({ OrderInfos: Type.Array(OrderInfo), _meta: Type.Optional(Type.Object({}, { additionalProperties: true })) })),
      },
      config: read,
    },
    async (request) => {
      const q = request.query;
      const { statuses, unknown } = parseStatusFilter(q.Status ?? '');
      if (unknown.length > 0) throw new CertdeskError('invalidInput', `Status ${unknown.join(', ')} is not one of PENDING, COMPLETE, REISSUE, CANCELLED, REVOKED, FAILED.`, { field: 'Status' });
      const productTypes = (q.ProductType ?? '').split(',').map((s) => s.trim().toUpperCase()).filter(Boolean);
      const page = Number(q.Page ?? 1);
      const perPage = Number(q.ItemsPerPage ?? DEFAULT_ITEMS_PER_PAGE);
      const orderBy = (q.OrderBy ?? 'ServiceOrderID') as 'ServiceOrderID';
      const orderDir = (q.OrderDir ?? 'DESC').toUpperCase() as 'ASC' | 'DESC';
      const commonName = q.CommonName === undefined || q.CommonName === '' ? undefined : q.CommonName.toLowerCase().replace(/[\\_]/g, (c) => `\\${c}`);
      const scheduled = parseBoolish(q.filterScheduledToReplace) === true;
      const inc = includes(q);
      const { orders, total } = await deps.orders.listOrders(
        principalOf(request), { statuses, productTypes, ...(commonName === undefined ? {} : { commonName }), orderBy, orderDir, offset: (page - 1) * perPage, limit: perPage }, inc.fulfillment, scheduled,
      );
      return {
        success: true as const,
        OrderInfos: orders.map((o) => orderInfo(o, inc)),
        _meta: { CommonName: q.CommonName ?? '', ItemsAvailable: total, ItemsPerPage: perPage, Page: page, OrderBy: orderBy, OrderDir: orderDir, ProductType: productTypes, Status: statuses },
      };
    },
  );

  app.get<{ Querystring: IncludeQuery & { FromDate: string; ToDate: string } }>(
    '/ModifiedOrders',
    {
      schema: {
        tags: ['orders'], summary: 'Orders changed in a time span (FromDate ≤ UpdateDate < ToDate)', security: bearer,
        querystring: Type.Object({ FromDate: Type.String({ minLength: 1, maxLength: 40 }), ToDate: Type.String({ minLength: 1, maxLength: 40 }), ...Include }),
        response: responses(okBody({ OrderInfos: Type.Array(OrderInfo) })),
      },
      config: read,
    },
    async (request) => {
      const from = parseTimestamp(request.query.FromDate);
      const to = parseTimestamp(request.query.ToDate);
      if (from === undefined) throw new CertdeskError('invalidInput', 'FromDate is not a timestamp (YYYY-MM-DDThh:mm:ssZ).', { field: 'FromDate' });
      if (to === undefined) throw new CertdeskError('invalidInput', 'ToDate is not a timestamp (YYYY-MM-DDThh:mm:ssZ).', { field: 'ToDate' });
      const inc = includes(request.query);
      const rows = await deps.orders.modifiedOrders(principalOf(request), from, to, inc.fulfillment);
      return { success: true as const, OrderInfos: rows.map((o) => orderInfo(o, inc)) };
    },
  );
}

interface Includes {
  fulfillment: boolean; orderParameters: boolean; billing: boolean; contacts: boolean; organization: boolean; dcv: boolean;
}

function includes(q: IncludeQuery): Includes {
  const on = (v: string | undefined) => parseBoolish(v) === true;
  return {
    fulfillment: on(q.includeFulfillment), orderParameters: on(q.includeOrderParameters), billing: on(q.includeBillingDetails),
    contacts: on(q.includeContacts), organization: on(q.includeOrganizationInfos), dcv: on(q.includeDCVStatus),
  };
}

/** OrderInfo (spec 2.11): status always, the other blocks by the include* flags; no Fulfillment while pending. */
export function orderInfo(view: OrderView, inc: Includes): Record<string, unknown> {
  const { order, names, certificate, distrust, dates } = view;
  const major = order.major_status as MajorStatus;
  const minor = order.minor_status as MinorStatus;
  const info: Record<string, unknown> = {
    ServiceOrderID: order.id,
    CommonName: order.common_name,
    OrderStatus: {
      OrderDate: formatTimestamp(order.order_date), UpdateDate: formatTimestamp(order.update_date),
      MajorStatus: major, MinorStatus: minor, Progress: progressOf(major, minor),
      ...(dates === undefined ? {} : { StartDate: formatTimestamp(dates.notBefore), EndDate: formatTimestamp(dates.notAfter) }),
    },
  };
  if (distrust !== undefined) {
    info.scheduledForReplacement = { eventCaDistrust: { Phase1: formatTimestamp(distrust.phase1), Phase2: formatTimestamp(distrust.phase2) } };
  }
  // Only an order with a certificate has the key at all (DESIGN §5.4).
  if (inc.fulfillment && certificate !== undefined) {
    info.Fulfillment = { Certificate: certificate.certificate, Intermediate: certificate.intermediate, Certificate_PKCS7: certificate.pkcs7 };
  }
  if (inc.billing) info.BillingInfo = { Currency: order.currency, Price: order.price_minor / 100, Status: order.billing_status };
  if (inc.contacts) info.ContactInfo = JSON.parse(order.contacts_json) as unknown;
  if (inc.organization && order.organization_json !== null) {
    // What the operator's vetting recorded stays internal; the customer sees the organization as ordered.
    const { Vetted: _vetted, ...organization } = JSON.parse(order.organization_json) as Record<string, unknown>;
    info.OrganizationInfo = organization;
  }
  if (inc.orderParameters) {
    const params = JSON.parse(order.params_json) as Record<string, unknown>;
    const fqdns = names.map((n) => n.name);
    info.OrderParameters = {
      ...params,
      ...(order.dv_auth_method === 'DNS' ? { DNSAuthDetails: { FQDNs: fqdns } } : {}),
      ...(order.dv_auth_method === 'FILE' ? { FileAuthDetails: { FQDNs: fqdns.filter((n) => !n.startsWith('*.')) } } : {}),
    };
  }
  if (inc.dcv) {
    info.DCVStatus = names.map((n) => ({
      Domain: n.name, Method: n.method, Status: n.status,
      ...(n.approver_email === null ? {} : { ApproverEmail: n.approver_email }),
      ...(n.validated_at === null ? {} : { ValidatedAt: formatTimestamp(n.validated_at) }),
      ...(n.last_checked_at === null ? {} : { LastCheck: formatTimestamp(n.last_checked_at) }),
      ...(n.last_problem === null ? {} : { Problem: n.last_problem }),
    }));
  }
  return info;
}
