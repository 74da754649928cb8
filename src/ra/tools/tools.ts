import type { Principal } from '../../core/index.js';
import { CertdeskError, type Clock } from '../../core/index.js';
import type { DcvValuesRepo } from '../../storage/index.js';
import {
  DEFAULT_BLOCKED_NAMES,
  baseDomain,
  checkDnsName,
  checkDnsSyntax,
  isBlockedName,
  parseCsr,
  toParsedCsr,
  type BaseDomain,
  type ParsedCsr,
} from '../../validation/index.js';
import type { CatalogService } from '../catalog/catalog.js';
import { randomString } from '../accounts/secrets.js';

/** DCV values live 30 days (DESIGN §5.6). */
export const DCV_VALUE_TTL = 30 * 86400;

/** A fresh DCV value: 20 alphanumerics, ~119 bits (≥ 112 per DESIGN §5.6; the hash style allows 20). */
export function newDcvValue(): string {
  return randomString('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789', 20);
}

export interface NameVerdict {
  readonly qualified: boolean;
  /** Why the name does not qualify; absent when it does. */
  readonly reason?: string;
  readonly csr?: string;
  readonly privateKey?: string;
}

export interface ToolsDeps {
  readonly catalog: CatalogService;
  readonly dcvValues: DcvValuesRepo;
  readonly clock: Clock;
  /** Operator's extra blocked names (CERTDESK_BLOCKED_NAMES), added to the reserved ones. */
  readonly blockedNames: readonly string[];
}

/** The stateless tools of the API: CSR parsing, name qualification, base domains. */
export class Tools {
  private readonly blockList: readonly string[];
  /** The brand whose DCV needs UniqueValue (hash style), if the catalog has one. */
  private readonly uniqueValueBrand: string | undefined;

  constructor(private readonly deps: ToolsDeps) {
    this.blockList = [...DEFAULT_BLOCKED_NAMES, ...deps.blockedNames];
    this.uniqueValueBrand = deps.catalog.brands().find((b) => b.dcvConvention === 'hash')?.id;
  }

  /**
   * Parses a CSR into spec 2.5 fields. UniqueValue is the caller's DCV value for this CSR at the
   * hash-style brand (created on first use, the same on repeat calls for 30 days), so that it
   * matches what a later order uses. Throws invalidCsr (field CSR).
   */
  async validateCsr(principal: Principal, pem: string): Promise<ParsedCsr> {
    const info = parseCsr(pem);
    let uniqueValue = '';
    if (this.uniqueValueBrand !== undefined) {
      uniqueValue = await this.deps.dcvValues.getOrCreate(
        { customerId: principal.customerId, caBrand: this.uniqueValueBrand, csrSha256: info.hashSha256 },
        newDcvValue(),
        this.deps.clock.nowSeconds(),
        DCV_VALUE_TTL,
      );
    }
    return toParsedCsr(info, uniqueValue);
  }

  /**
   * Whether a name qualifies for the free automated DV product: valid syntax, a registrable name
   * under a public suffix, not blocked. With `generatePrivateKey`, a qualified name also gets a
   * fresh RSA-2048 key and CSR, returned once and never stored. Throws invalidName (field
   * CommonName) only for text that is not a host name at all.
   */
  async validateName(commonName: string, generatePrivateKey: boolean): Promise<NameVerdict> {
    const syntax = checkDnsSyntax(commonName, { allowWildcard: false });
    if (!syntax.ok) throw new CertdeskError('invalidName', `CommonName: ${syntax.problem}`, { field: 'CommonName' });
    const checked = checkDnsName(commonName, { allowWildcard: false });
    if (!checked.ok) return { qualified: false, reason: checked.problem };
    if (isBlockedName(checked.name, this.blockList))
      return { qualified: false, reason: `${checked.name} is on the block list` };
    if (!generatePrivateKey) return { qualified: true };
    // keygen.ts, and @peculiar/x509 behind it, load at the first key generated.
    const { generateKeyAndCsr } = await import('./keygen.js');
    const { privateKeyPem, csrPem } = await generateKeyAndCsr(checked.name);
    return { qualified: true, csr: csrPem, privateKey: privateKeyPem };
  }

  /** The registered domain of a name. Throws invalidName (field FQDN) when there is none. */
  baseDomain(fqdn: string): BaseDomain {
    const found = baseDomain(fqdn);
    if (found === undefined)
      throw new CertdeskError('invalidName', `${fqdn.slice(0, 100)} has no registrable domain under a public suffix`, {
        field: 'FQDN',
      });
    return found;
  }
}
