import { Type } from 'typebox';
import { parseBoolish } from '../../core/index.js';
import type { Shop } from '../../ra/catalog/shop.js';
import type { App } from '../types.js';
import { principalOf } from '../types.js';
import { Boolish, bearer, okBody, responses } from './schemas.js';

const Int = (description: string) => Type.Integer({ minimum: 0, maximum: 2_147_483_647, description });

const QuoteQuery = Type.Object({
  ProductCode: Type.String({ minLength: 1, maxLength: 100 }),
  ValidityPeriod: Type.Integer({
    minimum: 1,
    maximum: 2_147_483_647,
    description: 'Months (12, 24) or days (180-365) on the free automated DV product',
  }),
  ServerCount: Type.Optional(Int('Servers; default 1, mandatory on license-priced products')),
  SubjectAltNameCount: Type.Optional(Int('Non-wildcard SAN hosts; default 0')),
  SubjectAltName: Type.Optional(Int('Alias of SubjectAltNameCount sent by some clients')),
  WildcardSubjectAltNameCount: Type.Optional(Int('Wildcard SAN hosts; default 0')),
  InstallationService: Type.Optional(Boolish),
  ExpediteIssuance: Type.Optional(Boolish),
});

const QuoteResponse = okBody({
  Currency: Type.String(),
  Price: Type.Number(),
  OrderParameters: Type.Object({
    ProductCode: Type.String(),
    ServerCount: Type.Integer(),
    SubjectAltNameCount: Type.Integer(),
    ValidityPeriod: Type.Integer(),
  }),
});

/** GET /Quote (spec §4.5): the exact price POST /Order would charge. */
export function registerQuote(app: App, deps: { shop: Shop }): void {
  app.get(
    '/Quote',
    {
      schema: {
        tags: ['catalog'],
        summary: 'Price of an order before purchase',
        security: bearer,
        querystring: QuoteQuery,
        response: responses(QuoteResponse),
      },
      config: { access: { area: 'catalog', write: false } },
    },
    async (request) => {
      const q = request.query;
      const subjectAltNameCount = q.SubjectAltNameCount ?? q.SubjectAltName ?? 0;
      const quote = await deps.shop.quote(principalOf(request), {
        productCode: q.ProductCode,
        validityPeriod: q.ValidityPeriod,
        serverCount: q.ServerCount ?? 0,
        subjectAltNameCount,
        wildcardSanCount: q.WildcardSubjectAltNameCount ?? 0,
        installationService: parseBoolish(q.InstallationService) ?? false,
        expediteIssuance: parseBoolish(q.ExpediteIssuance) ?? false,
      });
      return {
        success: true as const,
        Currency: quote.currency,
        Price: quote.price,
        OrderParameters: {
          ProductCode: q.ProductCode,
          ServerCount: quote.serverCount,
          SubjectAltNameCount: subjectAltNameCount,
          ValidityPeriod: q.ValidityPeriod,
        },
      };
    },
  );
}
