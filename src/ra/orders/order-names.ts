import type { FieldFault, Product } from '../../core/index.js';
import { baseDomain, checkDnsName, isBlockedName, type CsrInfo } from '../../validation/index.js';

// The names of an order (spec §4.9, §4.16): which hosts it covers, which it pays for, and which
// validation methods can show control of them.

/** Why FILE validation cannot cover these names (a wildcard: spec 4.9, DESIGN §5.6), or undefined. */
export function fileValidationProblem(names: readonly string[]): string | undefined {
  const wildcard = names.find((n) => n.startsWith('*.'));
  return wildcard === undefined
    ? undefined
    : `FILE validation cannot show control of a wildcard name (${wildcard}): use DNS or EMAIL.`;
}

/**
 * The names of an order (or a reissue): the CSR's common name first, then SubjectAltNames (an
 * array or a comma-separated string), each a public, unblocked host name, wildcards only where
 * the product allows them; the common name's www./bare twin comes free; every name the CSR asks
 * for must be among them. Faults go to `bad`. `sanHosts` are the SANs that count for the price.
 */
export function orderNames(
  product: Product | undefined,
  csr: CsrInfo | undefined,
  sanInput: unknown,
  blockList: readonly string[],
  bad: (field: string, message: string, kind?: FieldFault['kind']) => void,
): { names: string[]; sanHosts: string[] } {
  let sans: string[] = [];
  if (Array.isArray(sanInput)) sans = sanInput.map((s) => (typeof s === 'string' ? s : '\u0000'));
  else if (typeof sanInput === 'string') sans = sanInput.split(',');
  else if (sanInput !== undefined && sanInput !== null)
    bad('SubjectAltNames', 'SubjectAltNames is an array of host names or a comma-separated string.');
  sans = sans.map((s) => s.trim()).filter((s) => s !== '');
  const names: string[] = [];
  // Names already refused with a reason of their own: not refused a second time as "not ordered".
  const refused = new Set<string>();
  const refuse = (field: string, message: string, ...forms: string[]) => {
    for (const f of forms) refused.add(f);
    bad(field, message, 'invalidName');
  };
  const wildcardAllowed = (isCn: boolean) =>
    isCn ? product?.features.includes('WC') === true : product?.san?.features.includes('wildcard') === true;
  /** Adds a name that passes; returns its normal form when it is a host name at all. */
  const addName = (raw: string, isCn: boolean): string | undefined => {
    const field = isCn ? 'CSR' : 'SubjectAltNames';
    const checkedName = checkDnsName(raw, { allowWildcard: true });
    if (!checkedName.ok) {
      refuse(field, checkedName.problem, raw);
      return undefined;
    }
    const n = checkedName.name;
    if (n.startsWith('*.') && product !== undefined && !wildcardAllowed(isCn))
      refuse(field, `${product.code} does not allow the wildcard name ${n}.`, raw, n);
    else if (isBlockedName(n, blockList)) refuse(field, `${n} may not be certified (blocked name).`, raw, n);
    else if (!names.includes(n)) names.push(n);
    return n;
  };
  let cn: string | undefined;
  if (csr !== undefined) {
    const raw = csr.commonName !== '' ? csr.commonName : csr.dnsNames[0];
    if (raw === undefined || raw === '')
      bad('CSR', 'The CSR names no host: give a commonName or a dNSName.', 'invalidCsr');
    else cn = addName(raw, true);
  }
  for (const s of sans) addName(s, false);
  // The common name's www./bare twin comes free with it (as at every CA), if it may be certified;
  // any other CSR name must be ordered.
  const twin = cn === undefined ? undefined : wwwTwin(cn);
  if (csr !== undefined) {
    if (twin !== undefined && csr.dnsNames.includes(twin) && !names.includes(twin) && !refused.has(twin)) {
      // Held to the rules of an ordered name: a public suffix of the list's private section
      // (github.io for www.github.io) is a twin by the ICANN section only.
      const checkedTwin = checkDnsName(twin, { allowWildcard: false });
      if (!checkedTwin.ok) refuse('CSR', checkedTwin.problem, twin);
      else if (isBlockedName(twin, blockList)) refuse('CSR', `${twin} may not be certified (blocked name).`, twin);
      else if (names.includes(cn!)) names.push(twin);
    }
    const outside = csr.dnsNames.filter((n) => !names.includes(n) && !refused.has(n));
    if (outside.length > 0)
      bad(
        'SubjectAltNames',
        `The CSR asks for ${outside.join(', ')}, which the order does not name: add them to SubjectAltNames or leave them out of the CSR.`,
        'invalidName',
      );
  }
  return { names, sanHosts: names.slice(1).filter((n) => n !== twin) };
}

/** `www.example.com` ↔ `example.com`; undefined for wildcards and names with no registrable parent. */
export function wwwTwin(name: string): string | undefined {
  if (name.startsWith('*.')) return undefined;
  if (name.startsWith('www.')) return baseDomain(name.slice(4)) === undefined ? undefined : name.slice(4);
  return baseDomain(name)?.domain === name ? `www.${name}` : undefined;
}
