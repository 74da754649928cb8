import type { CheckedCsr } from './checks.js';
import type { IssueRequest } from './issuer.js';
import type { LeafTemplate } from './lint.js';
import { maxLifetime, subjectAttributes, type OrganizationSubject, type Profile } from './profiles.js';
import { newSerial } from './serials.js';
import {
  authorityInfoAccess,
  authorityKeyIdentifier,
  basicConstraints,
  certificatePolicies,
  crlDistributionPoints,
  extKeyUsage,
  keyUsage,
} from './x509.js';

/**
 * Everything that decides a leaf's contents, from its profile and the request: names, subject,
 * lifetime (the requested end, capped by the lifetime allowed at `now`), key usages, policies.
 * What lint checks before a byte is encoded.
 */
export function leafTemplate(
  profile: Profile,
  req: IssueRequest,
  now: number,
  key: CheckedCsr['key'],
  privateMaxDays?: number,
): LeafTemplate {
  const dnsNames = [...new Set((req.dnsNames ?? []).map((n) => n.toLowerCase()))];
  const emails = [...(req.emails ?? [])];
  const commonName =
    profile.hierarchy === 'tls'
      ? (req.commonName?.toLowerCase() ?? dnsNames[0])
      : profile.hierarchy === 'smime'
        ? undefined
        : req.organization?.organization;
  const subject = subjectAttributes(profile, commonName, req.organization as OrganizationSubject | undefined);
  const longest = maxLifetime(profile, now, privateMaxDays);
  const notAfter = Math.min(req.notAfter ?? Number.MAX_SAFE_INTEGER, now + longest - 1);
  return {
    profile,
    serial: newSerial(now),
    notBefore: now,
    notAfter,
    subject,
    dnsNames,
    emails,
    key,
    keyUsage: profile.keyUsage[key.type],
    extKeyUsage: profile.extKeyUsage,
    policies: profile.policies,
  };
}

/** The leaf extensions that depend only on the issuing CA and the profile: the same bytes for every leaf. */
export function fixedLeafExtensions(
  t: LeafTemplate,
  issuerKeyId: Uint8Array,
  links: { crl: string; caIssuers: string; ocsp: string },
): Uint8Array {
  return Buffer.concat([
    keyUsage(t.keyUsage),
    extKeyUsage(t.extKeyUsage),
    basicConstraints(false),
    authorityKeyIdentifier(issuerKeyId),
    authorityInfoAccess(links.ocsp, links.caIssuers),
    certificatePolicies(t.policies),
    crlDistributionPoints(links.crl),
  ]);
}
