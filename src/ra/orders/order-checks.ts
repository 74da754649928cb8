import {
  CertdeskError,
  ORDER_DCV_METHODS,
  SIGNATURE_HASH_ALGORITHMS,
  type CaBrand,
  type FieldFault,
  type OrderDcvMethod,
  type Product,
  type SignatureHashAlgorithm,
  type VoucherTerms,
} from '../../core/index.js';
import { checkCsr, type CheckedCsr } from '../../ca/index.js';
import { parseCsr, type CsrInfo } from '../../validation/index.js';
import { randomString } from '../accounts/secrets.js';
import { fileValidationProblem } from './order-names.js';

// The checks every way of making an order shares (OrderRules runs them): the CSR, the chain, the
// DCV method, the caller's PartnerOrderID, and what a redemption may ask of its voucher.

/** Records one fault of a request (all are reported at once). */
export type Bad = (field: string, message: string, kind?: FieldFault['kind']) => void;

/** Whether a PartnerOrderID is well formed (spec 2.8: the caller's own reference). */
export function partnerOrderIdProblem(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') return 'PartnerOrderID is a string.';
  const given = value.trim();
  if (given !== '' && !/^[\x21-\x7e]{1,64}$/.test(given))
    return 'PartnerOrderID is 1 to 64 printable ASCII characters without spaces.';
  return undefined;
}

/** The PartnerOrderID given to an order or voucher that came without one. */
export function newPartnerOrderId(): string {
  return `cd-${randomString('abcdefghijklmnopqrstuvwxyz0123456789', 20)}`;
}

/** What a redemption asks for beside what its voucher paid (spec §2.13): never more. */
export function withinVoucher(
  voucher: VoucherTerms,
  asked: { validityPeriod: number; serverCount: number; sanHosts: number; wildcardSans: number },
  bad: Bad,
): void {
  if (Number.isFinite(asked.validityPeriod) && asked.validityPeriod > voucher.validityPeriod)
    bad(
      'ValidityPeriod',
      `The voucher pays for a ValidityPeriod of ${voucher.validityPeriod}, not ${asked.validityPeriod}.`,
    );
  if (asked.serverCount > voucher.serverCount)
    bad('ServerCount', `The voucher pays for ${voucher.serverCount} server(s), not ${asked.serverCount}.`);
  if (asked.sanHosts > voucher.subjectAltNameCount)
    bad(
      'SubjectAltNames',
      `The voucher pays for ${voucher.subjectAltNameCount} SAN host(s); the order asks for ${asked.sanHosts}.`,
    );
  if (asked.wildcardSans > 0) bad('SubjectAltNames', 'The voucher pays for no wildcard SANs.');
}

/**
 * The CSR read once, its signature verified and its key checked by the CA's own rules: the RA's
 * view (names, hashes) and the CA's (`checked`, passed on to the issuer so it is not read again).
 * Faults on CSR.
 */
export function checkedCsrOf(pem: string, bad: Bad): { info: CsrInfo; checked: CheckedCsr } | undefined {
  try {
    const info = parseCsr(pem);
    return { info, checked: checkCsr(info) };
  } catch (e) {
    if (!(e instanceof CertdeskError)) throw e;
    bad('CSR', e.message, e.kind);
    return undefined;
  }
}

/** SignatureHashAlgorithm (spec 2.9): a known chain the brand offers; the ECC chains only for an ECC key. */
export function checkChain(
  sha: string,
  brand: CaBrand | undefined,
  csr: CsrInfo | undefined,
  bad: Bad,
): SignatureHashAlgorithm | undefined {
  if (!(SIGNATURE_HASH_ALGORITHMS as readonly string[]).includes(sha))
    return void bad(
      'SignatureHashAlgorithm',
      `SignatureHashAlgorithm must be one of ${SIGNATURE_HASH_ALGORITHMS.join(', ')}.`,
    );
  const chain = sha as SignatureHashAlgorithm;
  if (brand !== undefined && !brand.signatureHashAlgorithms.includes(chain))
    return void bad(
      'SignatureHashAlgorithm',
      `${chain} is not offered by ${brand.name} (offered: ${brand.signatureHashAlgorithms.join(', ')}).`,
    );
  if ((chain === 'SHA256-ECC-HYBRID' || chain === 'SHA256-ECC-FULL') && csr !== undefined && csr.keyAlgorithm !== 'ECC')
    return void bad('SignatureHashAlgorithm', `${chain} is for ECC keys; the CSR holds an ${csr.keyAlgorithm} key.`);
  return chain;
}

/** DVAuthMethod (spec 2.8): EMAIL, DNS or FILE, one the product offers, FILE never for a wildcard name. */
export function checkMethod(
  methodText: string,
  product: Product | undefined,
  names: readonly string[],
  bad: Bad,
): OrderDcvMethod | undefined {
  const wanted = methodText.toUpperCase();
  if (!(ORDER_DCV_METHODS as readonly string[]).includes(wanted))
    return void bad('DVAuthMethod', `DVAuthMethod must be EMAIL, DNS or FILE, not ${wanted}.`);
  const method = wanted as OrderDcvMethod;
  if (product !== undefined && !product.dvAuthMethods.includes(method))
    bad(
      'DVAuthMethod',
      `${product.code} does not offer ${method} validation (offered: ${product.dvAuthMethods.filter((m) => m !== 'META').join(', ')}).`,
    );
  const problem = method === 'FILE' ? fileValidationProblem(names) : undefined;
  if (problem !== undefined) bad('DVAuthMethod', problem);
  return method;
}
