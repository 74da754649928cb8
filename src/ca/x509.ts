/**
 * RFC 5280 certificate structures, encoded with der-writer: names, extensions, the TBSCertificate
 * and its signature. Everything here is a pure function of its input; what goes into a certificate
 * is decided by profiles.ts and checked by lint.ts.
 */
import { createHash } from 'node:crypto';
import { children, readTlv } from '../core/der.js';
import type { Signer } from './crl.js';
import {
  bits,
  explicit,
  ia5,
  ia5Bytes,
  implicitPrimitive,
  int,
  namedBits,
  octets,
  oid,
  printable,
  seq,
  setOf,
  time,
  tlv,
  TRUE,
  utf8,
  type Der,
} from './der-writer.js';

export const OID = {
  // Attribute types (RFC 5280 §4.1.2.4, X.520, EV Guidelines §7.1.4.2).
  commonName: '2.5.4.3',
  country: '2.5.4.6',
  locality: '2.5.4.7',
  state: '2.5.4.8',
  street: '2.5.4.9',
  organization: '2.5.4.10',
  organizationalUnit: '2.5.4.11',
  serialNumber: '2.5.4.5',
  businessCategory: '2.5.4.15',
  postalCode: '2.5.4.17',
  emailAddress: '1.2.840.113549.1.9.1',
  jurisdictionLocality: '1.3.6.1.4.1.311.60.2.1.1',
  jurisdictionState: '1.3.6.1.4.1.311.60.2.1.2',
  jurisdictionCountry: '1.3.6.1.4.1.311.60.2.1.3',
  // Extensions.
  subjectKeyIdentifier: '2.5.29.14',
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  crlDistributionPoints: '2.5.29.31',
  certificatePolicies: '2.5.29.32',
  authorityKeyIdentifier: '2.5.29.35',
  extKeyUsage: '2.5.29.37',
  authorityInfoAccess: '1.3.6.1.5.5.7.1.1',
  ocsp: '1.3.6.1.5.5.7.48.1',
  caIssuers: '1.3.6.1.5.5.7.48.2',
  // Extended key usages.
  serverAuth: '1.3.6.1.5.5.7.3.1',
  clientAuth: '1.3.6.1.5.5.7.3.2',
  codeSigning: '1.3.6.1.5.5.7.3.3',
  emailProtection: '1.3.6.1.5.5.7.3.4',
  // CA/Browser Forum policy identifiers.
  policyDv: '2.23.140.1.2.1',
  policyOv: '2.23.140.1.2.2',
  policyEv: '2.23.140.1.1',
  policyCodeSigning: '2.23.140.1.4.1',
  policySmimeMailbox: '2.23.140.1.5.1.3',
  // Signature algorithms.
  sha256WithRsa: '1.2.840.113549.1.1.11',
  sha384WithRsa: '1.2.840.113549.1.1.12',
  sha1WithRsa: '1.2.840.113549.1.1.5',
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  ecdsaWithSha384: '1.2.840.10045.4.3.3',
} as const;

/** keyUsage bit numbers (RFC 5280 §4.2.1.3). */
export const KU = { digitalSignature: 0, keyEncipherment: 2, keyAgreement: 4, keyCertSign: 5, cRLSign: 6 } as const;

/** One attribute of a distinguished name, in the order it is written. */
export interface NameAttribute {
  readonly type: string;
  readonly value: string;
  /** Where the value came from (an OrganizationSubject member), for lint messages. */
  readonly source?: string;
}

export type NameStringType = 'PrintableString' | 'IA5String' | 'UTF8String';

/**
 * The string type each attribute is written as: PrintableString where RFC 5280 (countryName,
 * serialNumber; Appendix A.1) and the EV Guidelines (jurisdictionCountryName, §9.2.4) require it,
 * IA5String for PKCS#9 emailAddress, and UTF8String for every DirectoryString (RFC 5280 §4.1.2.6).
 */
export function nameStringType(type: string): NameStringType {
  if (type === OID.country || type === OID.jurisdictionCountry || type === OID.serialNumber) return 'PrintableString';
  if (type === OID.emailAddress) return 'IA5String';
  return 'UTF8String';
}

const ENCODE: Record<NameStringType, (text: string) => Der> = {
  PrintableString: printable,
  IA5String: ia5,
  UTF8String: utf8,
};

/**
 * A Name: one attribute per RDN, in the given order, each in its nameStringType. Throws RangeError
 * for a value its type cannot hold (lint.ts refuses those first).
 */
export function name(attributes: readonly NameAttribute[]): Der {
  return seq(...attributes.map((a) => setOf(seq(oid(a.type), ENCODE[nameStringType(a.type)](a.value)))));
}

export function extension(type: string, critical: boolean, value: Der): Der {
  return critical ? seq(oid(type), TRUE, octets(value)) : seq(oid(type), octets(value));
}

export const basicConstraints = (ca: boolean, pathLen?: number): Der =>
  extension(OID.basicConstraints, true, ca ? seq(TRUE, ...(pathLen === undefined ? [] : [int(pathLen)])) : seq());

export const keyUsage = (usage: readonly number[]): Der => extension(OID.keyUsage, true, namedBits(usage));

export const extKeyUsage = (usages: readonly string[]): Der =>
  extension(OID.extKeyUsage, false, seq(...usages.map(oid)));

export const subjectKeyIdentifier = (keyId: Uint8Array): Der =>
  extension(OID.subjectKeyIdentifier, false, octets(keyId));

export const authorityKeyIdentifier = (keyId: Uint8Array): Der =>
  extension(OID.authorityKeyIdentifier, false, seq(implicitPrimitive(0, keyId)));

/**
 * subjectAltName with dNSName [2] and rfc822Name [1] entries (IA5String); critical when the
 * subject is empty. Throws RangeError for a non-ASCII name (lint.ts refuses those first).
 */
export function subjectAltName(dnsNames: readonly string[], emails: readonly string[], subjectEmpty: boolean): Der {
  const general = [
    ...emails.map((e) => implicitPrimitive(1, ia5Bytes(e))),
    ...dnsNames.map((d) => implicitPrimitive(2, ia5Bytes(d))),
  ];
  return extension(OID.subjectAltName, subjectEmpty, seq(...general));
}

/** One distribution point with a full name URI (IA5String: throws RangeError for a non-ASCII URL). */
export const crlDistributionPoints = (url: string): Der =>
  extension(OID.crlDistributionPoints, false, seq(seq(explicit(0, explicit(0, implicitPrimitive(6, ia5Bytes(url)))))));

export function authorityInfoAccess(ocspUrl: string | null, caIssuersUrl: string): Der {
  const access = (method: string, url: string) => seq(oid(method), implicitPrimitive(6, ia5Bytes(url)));
  return extension(
    OID.authorityInfoAccess,
    false,
    seq(...(ocspUrl === null ? [] : [access(OID.ocsp, ocspUrl)]), access(OID.caIssuers, caIssuersUrl)),
  );
}

export const certificatePolicies = (policies: readonly string[]): Der =>
  extension(OID.certificatePolicies, false, seq(...policies.map((p) => seq(oid(p)))));

export interface TbsInput {
  /** Serial number magnitude (positive, the top bit clear so no sign byte is needed). */
  readonly serial: Uint8Array;
  readonly signatureAlgorithm: Der;
  readonly issuer: Der;
  readonly notBefore: number;
  readonly notAfter: number;
  readonly subject: Der;
  readonly spki: Uint8Array;
  readonly extensions: readonly Der[];
}

const VERSION_3 = explicit(0, int(2));

export function tbsCertificate(t: TbsInput): Der {
  return seq(
    VERSION_3,
    tlv(0x02, t.serial),
    t.signatureAlgorithm,
    t.issuer,
    seq(time(t.notBefore), time(t.notAfter)),
    t.subject,
    t.spki,
    explicit(3, seq(...t.extensions)),
  );
}

/** Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signatureValue }. */
export function signed(tbs: Der, signer: Signer): Der {
  return seq(tbs, signer.algorithm, bits(signer.sign(tbs)));
}

/** RFC 5280 §4.2.1.2 method 1: SHA-1 of the subjectPublicKey BIT STRING value. */
export function keyIdentifier(subjectPublicKey: Uint8Array): Uint8Array {
  return createHash('sha1').update(subjectPublicKey).digest();
}

/** The subject Name and subjectPublicKeyInfo of a certificate (DER). */
export function subjectOf(der: Uint8Array): Uint8Array {
  const cert = readTlv(der, 0);
  const [tbs] = children(der, cert);
  const fields = children(der, tbs!);
  const offset = fields[0]!.tag === 0xa0 ? 1 : 0;
  const subject = fields[4 + offset]!;
  return der.subarray(subject.start, subject.end);
}
