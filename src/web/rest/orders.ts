import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type, type TSchema } from 'typebox';
import {
  CertdeskError,
  ORDER_BY_VALUES,
  formatTimestamp,
  parseBoolish,
  parseOrderSort,
  parseStatusFilter,
  parseTimestamp,
  SharedCache,
  systemClock,
  type Clock,
  type FieldFault,
  type OrderParameters,
} from '../../core/index.js';
import type { DnsAuthDetails, FileAuthDetails } from '../../ra/dcv/dcv-details.js';
import {
  DEFAULT_ITEMS_PER_PAGE,
  MAX_ITEMS_PER_PAGE,
  type OrderCertificate,
  type OrderReads,
} from '../../ra/orders/order-reads.js';
import type { Orders } from '../../ra/orders/orders.js';
import type { App } from '../types.js';
import { principalOf } from '../types.js';
import {
  echoParameters,
  fulfillment,
  includes,
  orderIds,
  orderInfo,
  type IncludeQuery,
  type Includes,
} from './order-info.js';
import { Include, OrderBody, OrderFailure, OrderInfo, PlacedOrder } from './order-schemas.js';
import { Boolish, bearer, okBody, responses } from './schemas.js';

/** What Fastify sends an object as; a body rendered before goes out the same. */
const JSON_BODY = 'application/json; charset=utf-8';

/** The include* flags as a short key: one bit each. */
function includeKey(inc: Includes): number {
  let key = 0;
  for (const on of Object.values(inc)) key = (key << 1) | (on ? 1 : 0);
  return key;
}

const read = { access: { area: 'orders', write: false } } as const;
const write = { access: { area: 'orders', write: true } } as const;

/**
 * POST /Order, POST /TestOrder, GET /Order/{id}, GET /Orders, GET /ModifiedOrders (spec §4.9, §4.12–4.14). `clock`
 * stamps the Timestamp of a refused order (the service's clock; the system's when not given).
 */
export function registerOrders(app: App, deps: { orders: Orders; orderReads: OrderReads; clock?: Clock }): void {
  const refusedOrder = refusedOrderHook(deps.clock ?? systemClock);
  // GET /Order bodies by order and include flags, each with the tag it was rendered under. Never
  // announced to other processes (SharedCache.connect): the tag, read from the database on every
  // request, is what keeps an entry true everywhere.
  const renderedOrders = new SharedCache<{ tag: string; body: string }>('rendered-orders', 4096);

  // POST /Order and POST /TestOrder take the same body and answer in the same shape.
  const orderRoute = (summary: string, description: string) => ({
    schema: {
      tags: ['orders'],
      summary,
      security: bearer,
      description,
      body: OrderBody,
      response: placingResponses(responses(PlacedOrder)),
    },
    config: write,
    preSerialization: refusedOrder,
  });

  app.post(
    '/Order',
    orderRoute(
      'Place an order',
      'Spec 4.9. Every fault of the order is reported at once in Errors (the first also flat), with ServiceOrderID 0; nothing is stored or charged.',
    ),
    async (request) => {
      const placed = await deps.orders.placeOrder(
        { principal: principalOf(request), clientAddress: request.ip },
        request.body,
      );
      return orderAnswer(placed.order.id, placed.order.orderDate, placed.order.parameters, placed);
    },
  );

  app.post(
    '/TestOrder',
    orderRoute(
      'Check an order without placing it',
      'Every check of POST /Order, answered in its shape with order id 0; nothing is stored, charged, mailed or validated. DCV details appear when POST /DNSData or /FileData made the value for the CSR.',
    ),
    async (request) => {
      const tested = await deps.orders.testOrder(principalOf(request), request.body);
      return orderAnswer(0, tested.at, tested.parameters, tested);
    },
  );

  app.get<{ Params: { ServiceOrderID: string }; Querystring: IncludeQuery }>(
    '/Order/:ServiceOrderID',
    {
      schema: {
        tags: ['orders'],
        summary: 'One order',
        security: bearer,
        params: Type.Object({ ServiceOrderID: Type.String({ pattern: '^[0-9]{1,10}$' }) }),
        querystring: Type.Object(Include),
        response: responses(okBody({ OrderInfo })),
      },
      config: read,
    },
    async (request, reply) => {
      const id = Number(request.params.ServiceOrderID);
      if (!Number.isSafeInteger(id) || id < 1 || id > 2_147_483_647)
        throw new CertdeskError('orderNotFound', undefined, { field: 'ServiceOrderID' });
      const inc = includes(request.query);
      const principal = principalOf(request);
      // Integrations poll an order until it is issued: the body rendered last time is sent again
      // while the order's tag (one cheap query, before the read) says nothing it shows changed.
      const tag = await deps.orderReads.orderTag(principal, id, inc.dcv);
      const key = `${id}:${includeKey(inc)}`;
      const kept = renderedOrders.get(key);
      if (kept !== undefined && kept.tag === tag) return reply.type(JSON_BODY).send(kept.body);
      const view = await deps.orderReads.getOrder(principal, id, inc.fulfillment);
      const body = reply.serialize({ success: true as const, OrderInfo: orderInfo(view, inc) }) as string;
      renderedOrders.set(key, { tag, body });
      return reply.type(JSON_BODY).send(body);
    },
  );

  app.get(
    '/Orders',
    {
      schema: {
        tags: ['orders'],
        summary: 'Search orders',
        security: bearer,
        querystring: Type.Object({
          Status: Type.Optional(Type.String({ maxLength: 200 })),
          ProductType: Type.Optional(Type.String({ maxLength: 100 })),
          CommonName: Type.Optional(Type.String({ maxLength: 300 })),
          Page: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
          ItemsPerPage: Type.Optional(
            Type.Integer({
              minimum: 1,
              maximum: MAX_ITEMS_PER_PAGE,
              description: `Default ${DEFAULT_ITEMS_PER_PAGE}, at most ${MAX_ITEMS_PER_PAGE}`,
            }),
          ),
          OrderBy: Type.Optional(
            Type.String({
              maxLength: 40,
              description: `Sort field, any case: ${ORDER_BY_VALUES.join(', ')} (ID, the default, is the order id)`,
            }),
          ),
          OrderDir: Type.Optional(Type.String({ maxLength: 10, description: 'ASC or DESC (the default), any case' })),
          filterScheduledToReplace: Type.Optional(Boolish),
          ExpiresWithinDays: Type.Optional(
            Type.Integer({
              minimum: 1,
              maximum: 3660,
              description:
                'certdesk extension: only COMPLETE orders whose current certificate ends within this many days from now (not those already expired)',
            }),
          ),
          ...Include,
        }),
        response: responses(
          okBody({
            OrderInfos: Type.Array(OrderInfo),
            _meta: Type.Optional(Type.Object({}, { additionalProperties: true })),
          }),
        ),
      },
      config: read,
    },
    async (request) => {
      const q = request.query;
      const { statuses, unknown } = parseStatusFilter(q.Status ?? '');
      if (unknown.length > 0)
        throw new CertdeskError(
          'invalidInput',
          `Status ${unknown.join(', ')} is not one of PENDING, COMPLETE, REISSUE, CANCELLED, REVOKED, FAILED.`,
          { field: 'Status' },
        );
      const productTypes = (q.ProductType ?? '')
        .split(',')
        .map((s) => s.trim().toUpperCase())
        .filter(Boolean);
      const page = q.Page ?? 1;
      const perPage = q.ItemsPerPage ?? DEFAULT_ITEMS_PER_PAGE;
      const sort = parseOrderSort(q.OrderBy, q.OrderDir);
      const faults: FieldFault[] = [];
      if (sort.field === undefined)
        faults.push({
          kind: 'invalidInput',
          field: 'OrderBy',
          message: `OrderBy ${JSON.stringify(q.OrderBy)} is not one of ${ORDER_BY_VALUES.join(', ')}.`,
        });
      if (sort.dir === undefined)
        faults.push({
          kind: 'invalidInput',
          field: 'OrderDir',
          message: `OrderDir ${JSON.stringify(q.OrderDir)} is not ASC or DESC.`,
        });
      if (faults.length > 0) throw CertdeskError.ofFaults(faults);
      const commonName = q.CommonName === undefined || q.CommonName === '' ? undefined : q.CommonName;
      const scheduled = parseBoolish(q.filterScheduledToReplace) === true;
      const now = (deps.clock ?? systemClock).nowSeconds();
      const inc = includes(q);
      const { orders, total } = await deps.orderReads.listOrders(
        principalOf(request),
        {
          statuses,
          productTypes,
          ...(commonName === undefined ? {} : { commonName }),
          ...(q.ExpiresWithinDays === undefined
            ? {}
            : { endsBetween: { from: now, to: now + q.ExpiresWithinDays * 86400 } }),
          orderBy: sort.field!,
          orderDir: sort.dir!,
          offset: (page - 1) * perPage,
          limit: perPage,
        },
        inc.fulfillment,
        scheduled,
      );
      return {
        success: true as const,
        OrderInfos: orders.map((o) => orderInfo(o, inc)),
        _meta: {
          CommonName: q.CommonName ?? '',
          ItemsAvailable: total,
          ItemsPerPage: perPage,
          Page: page,
          OrderBy: sort.orderBy,
          OrderDir: sort.dir,
          ProductType: productTypes,
          Status: statuses,
        },
      };
    },
  );

  app.get<{ Querystring: IncludeQuery & { FromDate: string; ToDate: string } }>(
    '/ModifiedOrders',
    {
      schema: {
        tags: ['orders'],
        summary: 'Orders changed in a time span (FromDate ≤ UpdateDate < ToDate)',
        security: bearer,
        querystring: Type.Object({
          FromDate: Type.String({ minLength: 1, maxLength: 40 }),
          ToDate: Type.String({ minLength: 1, maxLength: 40 }),
          ...Include,
        }),
        response: responses(okBody({ OrderInfos: Type.Array(OrderInfo) })),
      },
      config: read,
    },
    async (request) => {
      const from = parseTimestamp(request.query.FromDate);
      const to = parseTimestamp(request.query.ToDate);
      if (from === undefined)
        throw new CertdeskError('invalidInput', 'FromDate is not a timestamp (YYYY-MM-DDThh:mm:ssZ).', {
          field: 'FromDate',
        });
      if (to === undefined)
        throw new CertdeskError('invalidInput', 'ToDate is not a timestamp (YYYY-MM-DDThh:mm:ssZ).', {
          field: 'ToDate',
        });
      const inc = includes(request.query);
      const rows = await deps.orderReads.modifiedOrders(principalOf(request), from, to, inc.fulfillment);
      return { success: true as const, OrderInfos: rows.map((o) => orderInfo(o, inc)) };
    },
  );
}

/**
 * The hook of a route that places an order (POST /Order, /TestOrder, /Redeem): every failure
 * leaves through the app's error handler, and on its way out gains the two members spec §4.9 gives
 * a refused order. `clock` stamps its Timestamp.
 */
export function refusedOrderHook(clock: Clock) {
  return async (_request: FastifyRequest, _reply: FastifyReply, payload: unknown) =>
    typeof payload === 'object' && payload !== null && (payload as { success?: unknown }).success === false
      ? { ...payload, ...orderIds(0), Timestamp: formatTimestamp(clock.nowSeconds()) }
      : payload;
}

/** The response map of a route that places an order: its 200 body, and the refused order's shape for every failure. */
export function placingResponses(map: Record<string, TSchema>): Record<string, TSchema> {
  return Object.fromEntries(
    Object.entries(map).map(([status, schema]) => [status, status === '200' ? schema : OrderFailure]),
  );
}

/** POST /Order's answer (spec §4.9): the order id, OrderParameters with the DCV details of the method, Fulfillment when issued. */
export function orderAnswer(
  id: number,
  at: number,
  parameters: OrderParameters,
  extra: { dns?: DnsAuthDetails; file?: FileAuthDetails; certificate?: OrderCertificate },
) {
  return {
    success: true as const,
    Timestamp: formatTimestamp(at)!,
    ...orderIds(id),
    OrderParameters: {
      ...echoParameters(parameters),
      ...(extra.dns === undefined ? {} : { DNSAuthDetails: extra.dns }),
      ...(extra.file === undefined ? {} : { FileAuthDetails: extra.file }),
    },
    ...(extra.certificate === undefined ? {} : { Fulfillment: fulfillment(extra.certificate) }),
  };
}
