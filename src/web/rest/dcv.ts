import { Type } from 'typebox';
import type { DcvData } from '../../ra/dcv/dcv-data.js';
import type { App } from '../types.js';
import { principalOf } from '../types.js';
import { DNSAuthDetails, FileAuthDetails, bearer, okBody, responses } from './schemas.js';

const orders = { access: { area: 'orders', write: false } } as const;
// DNSData and FileData store the customer's DCV value for a CSR when it has none: a write.
const orderTool = { access: { area: 'orders', write: true } } as const;
const Body = Type.Object({
  CSR: Type.String({ minLength: 1, description: 'PEM PKCS#10' }),
  ProductCode: Type.String({ minLength: 1, maxLength: 100 }),
});
const Approver = Type.Object({ ApproverEmail: Type.String(), ApproverType: Type.String() });

/** POST /DNSData, POST /FileData, GET /ApproverList (spec §4.8, §4.19, §4.20). */
export function registerDcv(app: App, deps: { dcvData: DcvData }): void {
  app.post(
    '/DNSData',
    {
      schema: {
        tags: ['dcv'],
        summary: 'The DNS records to publish before ordering',
        security: bearer,
        body: Body,
        response: responses(okBody({ DNSAuthDetails })),
      },
      config: orderTool,
    },
    async (request) => ({
      success: true as const,
      DNSAuthDetails: await deps.dcvData.dnsData(principalOf(request), request.body.CSR, request.body.ProductCode),
    }),
  );

  app.post(
    '/FileData',
    {
      schema: {
        tags: ['dcv'],
        summary: 'The file to publish before ordering',
        security: bearer,
        body: Body,
        response: responses(okBody({ FileAuthDetails })),
      },
      config: orderTool,
    },
    async (request) => ({
      success: true as const,
      FileAuthDetails: await deps.dcvData.fileData(principalOf(request), request.body.CSR, request.body.ProductCode),
    }),
  );

  app.get(
    '/ApproverList',
    {
      schema: {
        tags: ['dcv'],
        summary: 'Who may approve EMAIL validation',
        security: bearer,
        querystring: Type.Object({
          CommonName: Type.String({ minLength: 1, maxLength: 300 }),
          ProductCode: Type.String({ minLength: 1, maxLength: 100 }),
          DNSNames: Type.Optional(Type.String({ maxLength: 20_000 })),
        }),
        response: responses(
          okBody({
            ApproverList: Type.Array(Approver),
            DomainApprovers: Type.Object({
              DomainApprover: Type.Array(Type.Object({ Domain: Type.String(), Approvers: Type.Array(Approver) })),
            }),
          }),
        ),
      },
      config: orders,
    },
    async (request) => {
      const q = request.query;
      const extra = (q.DNSNames ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
        .slice(0, 250);
      const list = await deps.dcvData.approverList(q.CommonName, q.ProductCode, extra);
      return {
        success: true as const,
        ApproverList: list[0]?.approvers ?? [],
        DomainApprovers: { DomainApprover: list.map((d) => ({ Domain: d.domain, Approvers: d.approvers })) },
      };
    },
  );
}
