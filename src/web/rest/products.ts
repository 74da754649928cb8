import { Type } from 'typebox';
import type { Shop } from '../../ra/catalog/shop.js';
import type { App } from '../types.js';
import { principalOf } from '../types.js';
import { bearer, okBody, responses } from './schemas.js';

const catalogRead = { access: { area: 'catalog', write: false } } as const;

const ProductDetails = Type.Object(
  {
    CA: Type.String(),
    Currency: Type.String(),
    Features: Type.Array(Type.String()),
    Licenses: Type.Integer(),
    MaxValidityPeriod: Type.Integer(),
    Price: Type.Number(),
    ProductCode: Type.String(),
    ProductName: Type.String(),
    ProductType: Type.String(),
    RefundPeriod: Type.Integer(),
    RenewPeriod: Type.Integer(),
    DVAuthMethods: Type.Array(Type.String()),
    SANFeatures: Type.Optional(Type.Array(Type.String())),
    SANPackagePrice: Type.Optional(Type.Number()),
    SANPackageSize: Type.Optional(Type.Integer()),
    SANMaxHosts: Type.Optional(Type.Integer()),
    SANHostPrice: Type.Optional(Type.Number()),
    SANWildcardPrice: Type.Optional(Type.Number()),
  },
  { description: 'Spec 2.3' },
);

/** GET /Products and GET /ProductDetails (spec §4.3, §4.4). */
export function registerProducts(app: App, deps: { shop: Shop }): void {
  app.get(
    '/Products',
    {
      schema: {
        tags: ['catalog'],
        summary: 'Product codes',
        security: bearer,
        response: responses(okBody({ Products: Type.Array(Type.String()) })),
      },
      config: catalogRead,
    },
    async () => ({ success: true as const, Products: deps.shop.productCodes() }),
  );

  app.get(
    '/ProductDetails',
    {
      schema: {
        tags: ['catalog'],
        summary: 'Details and price of one product in the account currency',
        security: bearer,
        querystring: Type.Object({ ProductCode: Type.String({ minLength: 1, maxLength: 100 }) }),
        response: responses(okBody({ ProductDetails })),
      },
      config: catalogRead,
    },
    async (request) => ({
      success: true as const,
      ProductDetails: await deps.shop.productDetails(principalOf(request), request.query.ProductCode),
    }),
  );

  app.get(
    '/UserAgreement',
    {
      schema: {
        tags: ['catalog'],
        summary: 'The CA’s subscriber agreement, to show before the order button',
        security: bearer,
        querystring: Type.Object({ ProductCode: Type.String({ minLength: 1, maxLength: 100 }) }),
        response: responses(okBody({ ProductCode: Type.String(), UserAgreement: Type.String() })),
      },
      config: catalogRead,
    },
    async (request) => ({
      success: true as const,
      ProductCode: request.query.ProductCode,
      UserAgreement: deps.shop.userAgreement(request.query.ProductCode),
    }),
  );
}
