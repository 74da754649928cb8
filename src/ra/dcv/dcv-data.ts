import { CertdeskError, type Clock, type Principal, type Product } from '../../core/index.js';
import type { DcvValuesRepo } from '../../storage/index.js';
import {
  DnsLookupError,
  checkDnsName,
  constructedApprovers,
  discoverApprovers,
  parseCsr,
  type Approver,
  type DcvResolver,
} from '../../validation/index.js';
import type { CatalogService } from '../catalog/catalog.js';
import { dcvExpectations, type DnsAuthDetails, type FileAuthDetails } from './dcv-details.js';
import { fileValidationProblem } from '../orders/order-names.js';

/**
 * POST /DNSData, POST /FileData and GET /ApproverList (spec §4.8, §4.19, §4.20; DESIGN §5.6):
 * what a customer must publish, or who may approve, before placing an order.
 */
export class DcvData {
  constructor(
    private readonly deps: {
      catalog: CatalogService;
      dcvValues: Pick<DcvValuesRepo, 'getOrCreate'>;
      clock: Clock;
      resolver: DcvResolver;
    },
  ) {}

  async dnsData(principal: Principal, csrPem: string, productCode: string): Promise<DnsAuthDetails> {
    return (await this.expectations(principal, csrPem, productCode, 'DNS')).dns;
  }

  async fileData(principal: Principal, csrPem: string, productCode: string): Promise<FileAuthDetails> {
    return (await this.expectations(principal, csrPem, productCode, 'FILE')).file;
  }

  private async expectations(principal: Principal, csrPem: string, productCode: string, method: 'DNS' | 'FILE') {
    const product = this.sslProduct(productCode);
    if (!product.dvAuthMethods.includes(method))
      throw new CertdeskError('invalidInput', `${product.code} does not offer ${method} validation.`, {
        field: 'ProductCode',
      });
    const csr = parseCsr(csrPem);
    const names = [...new Set([csr.commonName, ...csr.dnsNames].filter((n) => n !== '').map((n) => n.toLowerCase()))];
    if (names.length === 0) throw new CertdeskError('invalidCsr', 'The CSR names no host.', { field: 'CSR' });
    // FileData covers the CSR's other names; a CSR of wildcards only has none to cover.
    if (method === 'FILE' && names.every((n) => n.startsWith('*.')))
      throw new CertdeskError('invalidInput', fileValidationProblem(names), { field: 'CSR' });
    return dcvExpectations(this.deps, principal.customerId, this.deps.catalog.brand(product.brand), csr, names);
  }

  /**
   * Approvers of the common name and of each extra name: the constructed addresses and those
   * published in DNS. A DNS lookup that cannot be answered leaves the constructed ones.
   */
  async approverList(
    commonName: string,
    productCode: string,
    dnsNames: readonly string[],
  ): Promise<{ domain: string; approvers: Approver[] }[]> {
    const product = this.sslProduct(productCode);
    if (!product.dvAuthMethods.includes('EMAIL'))
      throw new CertdeskError('invalidInput', `${product.code} does not offer EMAIL validation.`, {
        field: 'ProductCode',
      });
    const out: { domain: string; approvers: Approver[] }[] = [];
    for (const raw of [commonName, ...dnsNames]) {
      const checked = checkDnsName(raw, { allowWildcard: true });
      if (!checked.ok)
        throw new CertdeskError('invalidName', checked.problem, {
          field: raw === commonName ? 'CommonName' : 'DNSNames',
        });
      if (out.some((o) => o.domain === checked.name)) continue;
      let approvers: Approver[];
      try {
        approvers = (await discoverApprovers(this.deps.resolver, checked.name)).approvers;
      } catch (e) {
        if (!(e instanceof DnsLookupError)) throw e;
        approvers = constructedApprovers(checked.name).map((ApproverEmail) => ({
          ApproverEmail,
          ApproverType: 'Generic' as const,
        }));
      }
      out.push({ domain: checked.name, approvers });
    }
    return out;
  }

  private sslProduct(code: string): Product {
    const product = this.deps.catalog.product(code);
    if (product.type !== 'SSL')
      throw new CertdeskError('invalidInput', `${product.code} is not a TLS product.`, { field: 'ProductCode' });
    return product;
  }
}
