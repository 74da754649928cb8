import { isIP } from 'node:net';
import { parse } from 'tldts';
import { CertdeskError, type FieldFault } from '../core/index.js';
import type { CheckedKey } from './checks.js';
import { isIa5String, isPrintableString, isWellFormedUnicode } from './der-writer.js';
import { maxLifetime, type Profile } from './profiles.js';
import { OID, nameStringType, type NameAttribute } from './x509.js';

/** Everything that decides a leaf's contents, linted before a byte of it is signed. */
export interface LeafTemplate {
  readonly profile: Profile;
  readonly serial: Uint8Array;
  readonly notBefore: number;
  readonly notAfter: number;
  readonly subject: readonly NameAttribute[];
  readonly dnsNames: readonly string[];
  readonly emails: readonly string[];
  readonly key: CheckedKey;
  readonly keyUsage: readonly number[];
  readonly extKeyUsage: readonly string[];
  readonly policies: readonly string[];
}

export interface LintOptions {
  /** Issue time; the lifetime limit is the one in force then. */
  readonly now: number;
  readonly privateMaxDays?: number;
  /** Most SANs in one certificate. */
  readonly maxNames?: number;
}

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
const EMAIL = /^[a-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[a-z0-9.-]{1,253}$/i;

/** Why a DNS name may not appear in a publicly trusted certificate, or undefined when it may. */
export function publicNameProblem(name: string): string | undefined {
  if (name.length === 0 || name.length > 253) return 'length is not 1-253';
  if (isIP(name) !== 0 || /^\[.*\]$/.test(name)) return 'IP addresses are not certified';
  const labels = name.split('.');
  const wildcard = labels[0] === '*';
  const rest = wildcard ? labels.slice(1) : labels;
  if (rest.length < 2) return 'not a fully qualified domain name';
  if (!rest.every((l) => LABEL.test(l)))
    return 'not a valid host name (letters, digits and hyphens; a wildcard only as the whole first label)';
  if (/^\d+$/.test(rest[rest.length - 1]!)) return 'the top-level label is numeric';
  const info = parse(rest.join('.'), { allowPrivateDomains: false });
  if (info.isIcann !== true || info.domain === null) return 'internal name: no public suffix';
  if (wildcard && info.domainWithoutSuffix === null) return 'a wildcard directly under a public suffix';
  return undefined;
}

/** X.520 / RFC 5280 Appendix A names of the subject attributes, for messages. */
const ATTRIBUTE_NAMES: Record<string, string> = {
  [OID.commonName]: 'commonName',
  [OID.country]: 'countryName',
  [OID.locality]: 'localityName',
  [OID.state]: 'stateOrProvinceName',
  [OID.street]: 'streetAddress',
  [OID.organization]: 'organizationName',
  [OID.organizationalUnit]: 'organizationalUnitName',
  [OID.serialNumber]: 'serialNumber',
  [OID.businessCategory]: 'businessCategory',
  [OID.postalCode]: 'postalCode',
  [OID.emailAddress]: 'emailAddress',
  [OID.jurisdictionLocality]: 'jurisdictionLocalityName',
  [OID.jurisdictionState]: 'jurisdictionStateOrProvinceName',
  [OID.jurisdictionCountry]: 'jurisdictionCountryName',
};

/**
 * Upper bounds in characters: RFC 5280 Appendix A.1 (ub-common-name … ub-serial-number,
 * ub-emailaddress-length) and X.520 for the attributes it does not list (ub-street-address,
 * ub-postal-code, ub-business-category); the EV jurisdiction attributes take those of locality
 * and state. countryName and jurisdictionCountryName are exactly two letters (checked apart).
 */
const UPPER_BOUNDS: Record<string, number> = {
  [OID.commonName]: 64,
  [OID.organization]: 64,
  [OID.organizationalUnit]: 64,
  [OID.locality]: 128,
  [OID.state]: 128,
  [OID.serialNumber]: 64,
  [OID.street]: 128,
  [OID.postalCode]: 40,
  [OID.businessCategory]: 128,
  [OID.emailAddress]: 255,
  [OID.jurisdictionLocality]: 128,
  [OID.jurisdictionState]: 128,
};

/** Whether `text` has C0 or C1 control characters or DEL: never information in a name (BR §7.1.4.3 wants no "metadata"). */
function hasControlCharacters(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) return true;
  }
  return false;
}

/**
 * Why a subject attribute's value may not be written as its string type (x509.ts nameStringType),
 * or undefined when it may. The message names the attribute and the OrganizationSubject member.
 */
export function subjectValueProblem(a: NameAttribute): string | undefined {
  const label = `subject ${ATTRIBUTE_NAMES[a.type] ?? a.type}${a.source === undefined ? '' : ` (${a.source})`} ${JSON.stringify(a.value)}`;
  const type = nameStringType(a.type);
  if (type === 'PrintableString' && !isPrintableString(a.value)) {
    const outside = [...new Set([...a.value].filter((c) => !isPrintableString(c)))]
      .map((c) => JSON.stringify(c))
      .join(' ');
    return `${label} has characters a PrintableString cannot hold (${outside}): it may use only A-Z a-z 0-9, space and ' ( ) + , - . / : = ?`;
  }
  if (type === 'IA5String' && !isIa5String(a.value))
    return `${label} has characters an IA5String cannot hold: it must be ASCII`;
  if (!isWellFormedUnicode(a.value))
    return `${label} is not well-formed Unicode (a lone surrogate): it has no UTF-8 encoding`;
  if (hasControlCharacters(a.value)) return `${label} has control characters`;
  if ((a.type === OID.country || a.type === OID.jurisdictionCountry) && !/^[A-Z]{2}$/.test(a.value))
    return `${label} is not an ISO 3166 two-letter code`;
  const bound = UPPER_BOUNDS[a.type];
  const length = [...a.value].length;
  if (bound !== undefined && length > bound) return `${label} has ${length} characters, more than the ${bound} allowed`;
  return undefined;
}

/** All problems of a template (empty when it may be signed). */
export function lintLeaf(t: LeafTemplate, o: LintOptions): FieldFault[] {
  // No closures here: under tsx (keepNames) each would cost a naming call on every certificate.
  const faults: FieldFault[] = [];
  const bad = faultsOf(faults);
  const p = t.profile;

  // Serial: positive, minimal, ≥ 64 random bits (BR §7.1), at most 20 octets (RFC 5280 §4.1.2.2).
  if (t.serial.length < 9 || t.serial.length > 20 || t.serial[0] === 0 || (t.serial[0]! & 0x80) !== 0)
    bad('internal', 'serial number must be 9-20 octets, positive and minimal');

  // Lifetime (RFC 5280 counts both ends: notAfter - notBefore + 1 seconds).
  const lifetime = t.notAfter - t.notBefore + 1;
  const limit = maxLifetime(p, o.now, o.privateMaxDays);
  if (t.notAfter <= t.notBefore) bad('invalidInput', 'notAfter is not after notBefore');
  if (lifetime > limit)
    bad(
      'invalidInput',
      `lifetime of ${Math.ceil(lifetime / 86_400)} days exceeds the ${limit / 86_400} allowed on the issue date`,
    );
  if (t.notBefore > o.now + 86_400) bad('invalidInput', 'notBefore lies more than a day in the future');

  // Key.
  const k = t.key;
  if (!(
    (k.type === 'rsa' && k.bits >= 2048 && k.bits % 8 === 0) ||
    (k.type === 'ecdsa' && (k.curve === 'P-256' || k.curve === 'P-384'))
  ))
    bad('badKey', 'key is not RSA ≥ 2048 or ECDSA P-256/P-384');

  // Names.
  const seen = new Set<string>();
  for (const n of t.dnsNames) {
    if (seen.has(n)) bad('invalidName', `${n} appears twice`);
    seen.add(n);
    if (n !== n.toLowerCase()) bad('invalidName', `${n} is not lower case`);
    const problem = p.publicDnsNames
      ? publicNameProblem(n)
      : n.length === 0 || n.length > 253
        ? 'bad length'
        : isIa5String(n)
          ? undefined
          : 'not ASCII (a dNSName is an IA5String: use the A-label)';
    if (problem !== undefined) bad('invalidName', `${n}: ${problem}`);
  }
  if (p.needsDnsNames && t.dnsNames.length === 0) bad('invalidName', 'a TLS certificate needs at least one DNS name');
  if (o.maxNames !== undefined && t.dnsNames.length + t.emails.length > o.maxNames)
    bad('invalidName', `more than ${o.maxNames} names`);
  for (const e of t.emails) if (!EMAIL.test(e)) bad('invalidInput', `${e} is not a mailbox address`);
  if (p.needsEmails && t.emails.length === 0)
    bad('invalidInput', 'an S/MIME certificate needs at least one mailbox address');
  if (!p.needsEmails && t.emails.length > 0)
    bad('invalidInput', 'mailbox addresses belong only in S/MIME certificates');

  // Subject against the profile.
  const cn = subjectValue(t, OID.commonName);
  if (cn !== undefined && p.hierarchy === 'tls' && !seen.has(cn))
    bad('invalidName', `commonName ${cn} is not among the subjectAltNames`);
  if (cn !== undefined && cn.length > 64) bad('invalidName', 'commonName longer than 64 characters');
  // Every value fits its string type and bound, or it is refused here rather than encoded malformed.
  for (const a of t.subject) {
    const problem =
      a.type === OID.commonName && cn !== undefined && cn.length > 64 ? undefined : subjectValueProblem(a);
    if (problem !== undefined) bad(a.type === OID.commonName ? 'invalidName' : 'invalidInput', problem);
  }
  if (p.organization === 'forbidden' && t.subject.some((a) => a.type !== OID.commonName))
    bad('invalidInput', `${p.id} subjects carry only a commonName`);
  if (
    p.organization === 'required' &&
    (subjectValue(t, OID.organization) === undefined || subjectValue(t, OID.country) === undefined)
  )
    bad('invalidInput', `${p.id} needs the vetted organization name and country`);
  if (
    p.ev &&
    [OID.businessCategory, OID.jurisdictionCountry, OID.serialNumber].some((o2) => subjectValue(t, o2) === undefined)
  )
    bad('invalidInput', 'EV needs businessCategory, jurisdictionCountry and the registration number');

  // Extensions against the profile.
  if (!sameSet(t.extKeyUsage, p.extKeyUsage)) bad('internal', 'extended key usage differs from the profile');
  if (p.hierarchy === 'tls' && !sameSet(t.extKeyUsage, [OID.serverAuth]))
    bad('internal', 'TLS certificates carry serverAuth only');
  if (!sameSet(t.keyUsage, p.keyUsage[k.type])) bad('internal', 'key usage differs from the profile for this key type');
  if (!sameSet(t.policies, p.policies)) bad('internal', 'certificate policies differ from the profile');
  return faults;
}

/** Records a fault of lint's in `faults`. */
function faultsOf(faults: FieldFault[]): (kind: FieldFault['kind'], message: string) => void {
  return (kind, message) => {
    faults.push({ kind, message: `certificate lint: ${message}` });
  };
}

function subjectValue(t: LeafTemplate, type: string): string | undefined {
  for (const a of t.subject) if (a.type === type) return a.value;
  return undefined;
}

function sameSet(a: readonly unknown[], b: readonly unknown[]): boolean {
  return a.length === b.length && a.every((x) => b.includes(x));
}

/** Throws one error listing every problem when the template must not be signed. */
export function assertLintClean(t: LeafTemplate, o: LintOptions): void {
  const faults = lintLeaf(t, o);
  if (faults.length === 0) return;
  const kind = faults.find((f) => f.kind !== 'internal')?.kind ?? 'internal';
  throw new CertdeskError(kind, faults.map((f) => f.message).join('; '), { faults });
}
