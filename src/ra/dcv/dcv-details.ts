import type { CaBrand, CustomerId } from '../../core/index.js';
import type { Clock } from '../../core/index.js';
import type { DcvValuesRepo } from '../../storage/index.js';
import { DCV_VALUE_TTL, newDcvValue } from '../tools/tools.js';

/** spec 2.10 DNSAuthDetails. */
export interface DnsAuthDetails {
  readonly PointerType: 'TXT' | 'CNAME';
  readonly DNSEntry: string;
  readonly DNSValue: string;
  readonly Example: string;
  readonly FQDNs: string[];
}

/** spec 2.10 FileAuthDetails. */
export interface FileAuthDetails {
  readonly FileName: string;
  readonly FilePath: string;
  readonly FileContents: string;
  readonly FQDNs: string[];
}

export const FILE_PATH = '/.well-known/pki-validation/';

/**
 * Where a DNS record goes for a name (spec 4.19): a leading `www.` label or wildcard is dropped,
 * other names need the record at the name itself.
 */
export function dnsRecordName(name: string): string {
  if (name.startsWith('*.')) return name.slice(2);
  if (name.startsWith('www.') && name.split('.').length > 2) return name.slice(4);
  return name;
}

/** What DCV needs to know of a CSR: the hashes of its DER, upper-case hex. */
export interface CsrHashes {
  readonly hashMd5: string;
  readonly hashSha256: string;
}

/** The expected DNS and FILE proofs of one order or CSR at one brand (DESIGN §5.5/§5.6). */
export interface DcvExpectations {
  /** Token style: the random value (also the hash style's UniqueValue). */
  readonly value: string;
  readonly dns: DnsAuthDetails;
  readonly file: FileAuthDetails;
  /** Hash style: the CNAME label (`_<md5>`) and target; token style: undefined. */
  readonly cname?: { readonly label: string; readonly target: string };
}

/**
 * What proves control at a brand, for a CSR (its hashes, upper-case hex) and the DCV value: the
 * file's name and contents, and for the hash-style brand the CNAME label and target. The one
 * definition used to show the proof (DNSData, FileData, orders) and to check it (the worker).
 */
export function expectedProofs(
  brand: CaBrand,
  csr: CsrHashes,
  value: string,
): { file: { name: string; contents: string }; cname?: { label: string; target: string } } {
  if (brand.dcvConvention === 'token') return { file: { name: 'fileauth.txt', contents: value } };
  const sha = csr.hashSha256.toLowerCase();
  return {
    file: {
      name: `${csr.hashMd5.toUpperCase()}.txt`,
      contents: `${csr.hashSha256.toUpperCase()}\n${brand.caDomain}\n${value}`,
    },
    cname: { label: `_${csr.hashMd5.toLowerCase()}`, target: `${sha.slice(0, 32)}.${sha.slice(32)}.${brand.caDomain}` },
  };
}

/**
 * The DCV details for a CSR's names at a brand. The value is the customer's for this brand and
 * CSR (created on first use, the same for 30 days), so /DNSData, /FileData, /ValidateCSR and the
 * order all agree.
 */
export async function dcvExpectations(
  deps: { dcvValues: Pick<DcvValuesRepo, 'getOrCreate'>; clock: Clock },
  customerId: CustomerId,
  brand: CaBrand,
  csr: CsrHashes,
  names: readonly string[],
): Promise<DcvExpectations> {
  const value = await deps.dcvValues.getOrCreate(
    { customerId, caBrand: brand.id, csrSha256: csr.hashSha256 },
    newDcvValue(),
    deps.clock.nowSeconds(),
    DCV_VALUE_TTL,
  );
  return dcvDetailsFor(brand, csr, names, value);
}

/** The DCV details for a CSR's names at a brand, with the DCV value `value`. */
export function dcvDetailsFor(
  brand: CaBrand,
  csr: CsrHashes,
  names: readonly string[],
  value: string,
): DcvExpectations {
  const dnsNames = [...new Set(names.map(dnsRecordName))];
  const fileNames = names.filter((n) => !n.startsWith('*.'));
  const proofs = expectedProofs(brand, csr, value);
  const file = {
    FileName: proofs.file.name,
    FilePath: FILE_PATH,
    FileContents: proofs.file.contents,
    FQDNs: fileNames,
  };
  if (proofs.cname === undefined) {
    return {
      value,
      file,
      dns: {
        PointerType: 'TXT',
        DNSEntry: dnsNames[0] ?? '',
        DNSValue: value,
        Example: `${dnsNames[0] ?? ''}. 3600 IN TXT "${value}"`,
        FQDNs: dnsNames,
      },
    };
  }
  const { label, target } = proofs.cname;
  return {
    value,
    file,
    cname: proofs.cname,
    dns: {
      PointerType: 'CNAME',
      DNSEntry: label,
      DNSValue: target,
      Example: `${label}.${names[0] ?? ''}. 3600 IN CNAME ${target}.`,
      FQDNs: [...names],
    },
  };
}
