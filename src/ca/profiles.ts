import { tlsMaxLifetimeDays, type ProductType, type ValidationLevel } from '../core/index.js';
import { KU, OID, type NameAttribute } from './x509.js';

/** The leaf certificate kinds the built-in CA issues (DESIGN §5.7). */
export type ProfileId = 'tls-dv' | 'tls-ov' | 'tls-ev' | 'codesign' | 'smime';

export interface Profile {
  readonly id: ProfileId;
  /** Which issuing CA signs it: the TLS intermediates or the dedicated code signing / S/MIME ones. */
  readonly hierarchy: 'tls' | 'codesign' | 'smime';
  readonly policies: readonly string[];
  readonly extKeyUsage: readonly string[];
  /** keyUsage bits by key type (RFC 5280 §4.2.1.3; BR 7.1.2.7.11). */
  readonly keyUsage: { readonly rsa: readonly number[]; readonly ecdsa: readonly number[] };
  /** What the subject may hold beyond commonName (DV none; OV/EV the vetted organization). */
  readonly organization: 'forbidden' | 'required';
  readonly ev: boolean;
  /** Subject names are host names checked against the public suffix list (no internal names, no IPs). */
  readonly publicDnsNames: boolean;
  readonly needsDnsNames: boolean;
  readonly needsEmails: boolean;
}

const TLS_KU = { rsa: [KU.digitalSignature, KU.keyEncipherment], ecdsa: [KU.digitalSignature] };
const tls = (id: ProfileId, policy: string, organization: Profile['organization'], ev: boolean): Profile => ({
  id,
  hierarchy: 'tls',
  policies: [policy],
  extKeyUsage: [OID.serverAuth],
  keyUsage: TLS_KU,
  organization,
  ev,
  publicDnsNames: true,
  needsDnsNames: true,
  needsEmails: false,
});

export const PROFILES: Readonly<Record<ProfileId, Profile>> = {
  'tls-dv': tls('tls-dv', OID.policyDv, 'forbidden', false),
  'tls-ov': tls('tls-ov', OID.policyOv, 'required', false),
  'tls-ev': tls('tls-ev', OID.policyEv, 'required', true),
  codesign: {
    id: 'codesign',
    hierarchy: 'codesign',
    policies: [OID.policyCodeSigning],
    extKeyUsage: [OID.codeSigning],
    keyUsage: { rsa: [KU.digitalSignature], ecdsa: [KU.digitalSignature] },
    organization: 'required',
    ev: false,
    publicDnsNames: false,
    needsDnsNames: false,
    needsEmails: false,
  },
  smime: {
    id: 'smime',
    hierarchy: 'smime',
    policies: [OID.policySmimeMailbox],
    extKeyUsage: [OID.emailProtection],
    keyUsage: { rsa: [KU.digitalSignature, KU.keyEncipherment], ecdsa: [KU.digitalSignature, KU.keyAgreement] },
    organization: 'forbidden',
    ev: false,
    publicDnsNames: false,
    needsDnsNames: false,
    needsEmails: true,
  },
};

/** The profile of a catalog product; undefined for products that are not certificates (trust seals). */
export function profileFor(type: ProductType, level: ValidationLevel | null): Profile | undefined {
  if (type === 'SSL') return PROFILES[level === 'EV' ? 'tls-ev' : level === 'OV' ? 'tls-ov' : 'tls-dv'];
  if (type === 'CODESIGN') return PROFILES.codesign;
  if (type === 'SMIME') return PROFILES.smime;
  return undefined;
}

const DAY = 86_400;

/** Code signing: 39 months (CS BR §6.3.2); S/MIME mailbox certificates: 825 days (S/MIME BR §6.3.2). */
const OTHER_MAX_DAYS: Record<'codesign' | 'smime', number> = { codesign: 460, smime: 825 };

/**
 * The longest lifetime (seconds) of a leaf of `profile` issued at `now`. `privateMaxDays` (from
 * CERTDESK_CA_MAX_VALIDITY_DAYS) replaces the public schedule for a private PKI.
 */
export function maxLifetime(profile: Profile, now: number, privateMaxDays?: number): number {
  if (privateMaxDays !== undefined) return privateMaxDays * DAY;
  if (profile.hierarchy !== 'tls') return OTHER_MAX_DAYS[profile.hierarchy] * DAY;
  return tlsMaxLifetimeDays(now) * DAY;
}

/** Vetted organization data for OV, EV and code signing subjects (filled by the RA from vetting). */
export interface OrganizationSubject {
  readonly organization: string;
  readonly country: string;
  readonly state?: string;
  readonly locality?: string;
  readonly street?: string;
  readonly postalCode?: string;
  /** EV: Private Organization, Government Entity, Business Entity or Non-Commercial Entity. */
  readonly businessCategory?: string;
  /** EV: registration number at the jurisdiction's registry. */
  readonly registrationNumber?: string;
  readonly jurisdictionCountry?: string;
  readonly jurisdictionState?: string;
  readonly jurisdictionLocality?: string;
}

/**
 * The subject attributes of a leaf, in the order they are written (most significant first), each
 * organization value marked with the OrganizationSubject member it came from. Values are taken
 * as given: whether they fit their string types is lint's to say (lint.ts).
 */
export function subjectAttributes(
  profile: Profile,
  commonName: string | undefined,
  org: OrganizationSubject | undefined,
): NameAttribute[] {
  const out: NameAttribute[] = [];
  if (profile.organization === 'required' && org !== undefined) {
    if (profile.ev) {
      add(out, OID.businessCategory, org.businessCategory, 'businessCategory');
      add(out, OID.jurisdictionCountry, org.jurisdictionCountry, 'jurisdictionCountry');
      add(out, OID.jurisdictionState, org.jurisdictionState, 'jurisdictionState');
      add(out, OID.jurisdictionLocality, org.jurisdictionLocality, 'jurisdictionLocality');
      add(out, OID.serialNumber, org.registrationNumber, 'registrationNumber');
    }
    add(out, OID.country, org.country, 'country');
    add(out, OID.state, org.state, 'state');
    add(out, OID.locality, org.locality, 'locality');
    add(out, OID.street, org.street, 'street');
    add(out, OID.postalCode, org.postalCode, 'postalCode');
    add(out, OID.organization, org.organization, 'organization');
  }
  add(out, OID.commonName, commonName);
  return out;
}

// A module function, not a closure: under tsx (keepNames) a closure costs a naming call on every certificate.
function add(out: NameAttribute[], type: string, value: string | undefined, source?: keyof OrganizationSubject): void {
  if (value !== undefined && value !== '') out.push(source === undefined ? { type, value } : { type, value, source });
}
