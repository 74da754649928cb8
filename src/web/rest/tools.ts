import { Type } from 'typebox';
import { parseBoolish } from '../../core/index.js';
import type { Tools } from '../../ra/tools/tools.js';
import type { App } from '../types.js';
import { principalOf } from '../types.js';
import { BoolishBody, bearer, okBody, responses } from './schemas.js';

const orderTool = { access: { area: 'orders', write: true } } as const;

const ParsedCSR = Type.Object(
  {
    CommonName: Type.String(),
    Organization: Type.String(),
    OrganizationUnit: Type.String(),
    Locality: Type.String(),
    State: Type.String(),
    Country: Type.String(),
    Email: Type.String(),
    SignaturAlgorithm: Type.String({ description: 'Spelled as in the spec' }),
    KeyEncryptionAlgorithm: Type.String({
      description: '`RSA`, `ECC` or `DSA`; keys the spec does not name show their own name (`Ed25519`, `Ed448`)',
    }),
    KeyLength: Type.Integer(),
    HashMD5: Type.String(),
    HashSHA256: Type.String(),
    UniqueValue: Type.String(),
  },
  { description: 'Spec 2.5' },
);

/** POST /ValidateCSR, POST /ValidateName and GET /BaseDomain/{FQDN} (spec §4.6, §4.18, §4.21). */
export function registerTools(app: App, deps: { tools: Tools }): void {
  app.post(
    '/ValidateCSR',
    {
      schema: {
        tags: ['tools'],
        summary: 'Parse and check a CSR',
        security: bearer,
        body: Type.Object({ CSR: Type.String({ minLength: 1, description: 'PEM PKCS#10 (RSA, ECC or DSA key)' }) }),
        response: responses(okBody({ ParsedCSR })),
      },
      config: orderTool,
    },
    async (request) => ({
      success: true as const,
      ParsedCSR: await deps.tools.validateCsr(principalOf(request), request.body.CSR),
    }),
  );

  app.post(
    '/ValidateName',
    {
      schema: {
        tags: ['tools'],
        summary: 'Whether a name qualifies for the free automated DV product',
        security: bearer,
        body: Type.Object({
          CommonName: Type.String({ minLength: 1, maxLength: 300 }),
          GeneratePrivateKey: Type.Optional(BoolishBody),
        }),
        response: responses(
          okBody({
            IsQualified: Type.Boolean(),
            Message: Type.Optional(Type.String({ description: 'Why the name does not qualify' })),
            CSR: Type.Optional(Type.String()),
            PrivateKey: Type.Optional(Type.String({ description: 'Returned once; never stored' })),
          }),
        ),
      },
      config: orderTool,
    },
    async (request, reply) => {
      const verdict = await deps.tools.validateName(
        request.body.CommonName,
        parseBoolish(request.body.GeneratePrivateKey) === true,
      );
      if (verdict.privateKey !== undefined) void reply.header('cache-control', 'no-store');
      return {
        success: true as const,
        IsQualified: verdict.qualified,
        ...(verdict.reason === undefined ? {} : { Message: verdict.reason }),
        ...(verdict.csr === undefined ? {} : { CSR: verdict.csr, PrivateKey: verdict.privateKey }),
      };
    },
  );

  app.get(
    '/BaseDomain/:FQDN',
    {
      schema: {
        tags: ['tools'],
        summary: 'The registered domain of a name (no `success` member)',
        security: bearer,
        params: Type.Object({ FQDN: Type.String({ minLength: 1, maxLength: 300 }) }),
        response: responses(Type.Object({ fqdn: Type.String(), domain: Type.String() })),
      },
      config: { access: { area: 'catalog', write: false } },
    },
    async (request) => deps.tools.baseDomain(request.params.FQDN),
  );
}
