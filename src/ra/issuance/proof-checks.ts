import { readCsr, type Order } from '../../core/index.js';
import {
  checkCaa,
  checkDnsCname,
  checkDnsTxt,
  checkFile,
  lookupsOnce,
  type DcvResolver,
  type DnsLookups,
  type FileCheckOptions,
} from '../../validation/index.js';
import type { CatalogService } from '../catalog/catalog.js';
import { dnsRecordName, expectedProofs, type CsrHashes } from '../dcv/dcv-details.js';

export interface ProofChecksDeps {
  readonly catalog: CatalogService;
  readonly resolver: DcvResolver;
  readonly file: Omit<FileCheckOptions, 'resolve'>;
}

/**
 * Whether an order's names are shown: its DNS record or file in place (DESIGN §5.6), and CAA
 * permitting the brand to issue (RFC 8659). Used by the order flow's checks, right before signing,
 * and by POST /Order for an order about to be placed.
 */
export class ProofChecks {
  constructor(private readonly deps: ProofChecksDeps) {}

  /** The DNS lookups of one order's checks (`checkProof`, `caaProblem`), each question asked once. */
  lookupsForOneOrder(): DnsLookups {
    return lookupsOnce(this.deps.resolver);
  }

  /** Whether the DNS record or file for one name of an order (or an order about to be placed) is in place. */
  async checkProof(
    order: Pick<Order, 'caBrand' | 'dcvValue' | 'csrPem'> & { hashes?: CsrHashes },
    name: string,
    method: 'DNS' | 'FILE',
    dns: DnsLookups = this.deps.resolver,
  ): Promise<{ ok: true } | { ok: false; problem: string; transient?: boolean }> {
    const brand = this.deps.catalog.brand(order.caBrand);
    const value = order.dcvValue ?? '';
    // Only the hash-style brand needs the CSR's hashes; the caller may have them already.
    const hashes =
      brand.dcvConvention === 'hash' ? (order.hashes ?? this.csrHashes(order)) : { hashMd5: '', hashSha256: '' };
    const { file, cname } = expectedProofs(brand, hashes, value);
    if (method === 'DNS') {
      if (cname === undefined) return checkDnsTxt(dns, dnsRecordName(name), value);
      return checkDnsCname(dns, name.replace(/^\*\./, ''), cname.label.slice(1), cname.target);
    }
    return checkFile(name, file.name, file.contents, { ...this.deps.file, resolve: (host) => dns.addresses(host) });
  }

  /** HashMD5 and HashSHA256 of the order's CSR (DER), upper-case hex as /ValidateCSR shows them. */
  private csrHashes(order: Pick<Order, 'csrPem'>): CsrHashes {
    const { hashMd5, hashSha256 } = readCsr(order.csrPem ?? '');
    return { hashMd5, hashSha256 };
  }

  /**
   * CAA for every name (RFC 8659): undefined when all permit; `forbidden` names the record that
   * does not; `transient` when a lookup could not be answered.
   */
  async caaProblem(
    brandId: string,
    names: readonly string[],
    dns: DnsLookups = this.deps.resolver,
  ): Promise<{ forbidden?: string; transient?: string } | undefined> {
    const brand = this.deps.catalog.brand(brandId);
    for (const name of names) {
      const caa = await checkCaa(dns, name, [brand.caDomain]);
      if (caa.permitted) continue;
      if ('transient' in caa) return { transient: `CAA lookup for ${name} failed: ${caa.problem}` };
      return { forbidden: `CAA at ${caa.relevant} forbids ${brand.name} to issue for ${name}: ${caa.problem}` };
    }
    return undefined;
  }
}
