import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CertdeskError } from '../core/index.js';
import { checkPublicKey } from './checks.js';
import { ia5, ia5Bytes, printable, utf8 } from './der-writer.js';
import { leafTemplate } from './leaf.js';
import { assertLintClean, lintLeaf, subjectValueProblem } from './lint.js';
import { PROFILES, type OrganizationSubject, type ProfileId } from './profiles.js';
import { name, OID } from './x509.js';

const NOW = 1_795_219_200;
const key = checkPublicKey(
  generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'der' }),
);
const PRODUCT = { code: 'X', brand: 'X', type: 'SSL' as const, validationLevel: 'EV' as const };
const EV: OrganizationSubject = {
  organization: 'Acme Widgets GmbH',
  country: 'DE',
  state: 'Berlin',
  locality: 'Berlin',
  businessCategory: 'Private Organization',
  registrationNumber: 'HRB 12345',
  jurisdictionCountry: 'DE',
};

/** The lint messages of a leaf of `profile` for `org` (TLS: www.example.com). */
function lint(
  profile: ProfileId,
  org: Partial<OrganizationSubject>,
  names: { dnsNames?: string[]; emails?: string[] } = {},
): string[] {
  const req = {
    csr: undefined as never,
    product: PRODUCT,
    dnsNames: ['www.example.com'],
    organization: { ...EV, ...org },
    ...names,
  };
  return lintLeaf(leafTemplate(PROFILES[profile], req, NOW, key), { now: NOW }).map((f) => f.message ?? '');
}

describe('string writers check their input', () => {
  it('ok/PrintableString, IA5String and UTF8String of text that fits', () => {
    expect(Buffer.from(printable("HRB 12345 (A-Z a-z 0-9 ' + , - . / : = ?)")).subarray(0, 2)).toEqual(
      Buffer.from([0x13, 41]),
    );
    expect(Buffer.from(ia5('who@example.com'))).toEqual(
      Buffer.concat([Buffer.from([0x16, 15]), Buffer.from('who@example.com')]),
    );
    expect(Buffer.from(utf8('Łódź 🙂'))).toEqual(
      Buffer.concat([Buffer.from([0x0c, 12]), Buffer.from('Łódź 🙂', 'utf8')]),
    );
  });

  it.each([
    ['fail/printable-umlaut', () => printable('HRB 12345 Ü')],
    ['fail/printable-outside-latin1', () => printable('KRS 0000ł12')],
    ['fail/printable-ampersand-underscore-star-at', () => printable('A&B_C*D@E')],
    ['fail/ia5-non-ascii', () => ia5('jürgen@example.com')],
    ['fail/ia5-bytes-idn-u-label', () => ia5Bytes('bücher.example')],
    ['fail/utf8-lone-surrogate', () => utf8('Bad \ud800 Org')],
  ])('%s throws a RangeError instead of writing malformed bytes', (_id, fn) => {
    expect(fn).toThrow(RangeError);
  });

  it('ok/name() writes each attribute in its type: PrintableString, IA5String (emailAddress), UTF8String', () => {
    const der = Buffer.from(
      name([
        { type: OID.country, value: 'DE' },
        { type: OID.serialNumber, value: 'HRB 1' },
        { type: OID.jurisdictionCountry, value: 'DE' },
        { type: OID.emailAddress, value: 'a@example.com' },
        { type: OID.organization, value: 'Müller' },
      ]),
    );
    const tagAfter = (oidTail: number[]) => der[der.indexOf(Buffer.from(oidTail)) + oidTail.length];
    expect(tagAfter([0x55, 0x04, 0x06])).toBe(0x13);
    expect(tagAfter([0x55, 0x04, 0x05])).toBe(0x13);
    expect(tagAfter([0x3c, 0x02, 0x01, 0x03])).toBe(0x13);
    expect(tagAfter([0x0d, 0x01, 0x09, 0x01])).toBe(0x16);
    expect(tagAfter([0x55, 0x04, 0x0a])).toBe(0x0c);
  });
});

describe('lint: subject values fit their ASN.1 string types', () => {
  it('ok/vetted organizations with UTF-8 names and PrintableString registration numbers', () => {
    expect(
      lint('tls-ev', {
        organization: 'Müller & Söhne GmbH',
        locality: 'Łódź',
        registrationNumber: "HRB 12345 (Abt. B/2) + 'x' = y?",
      }),
    ).toEqual([]);
    expect(
      lint('tls-ev', { organization: 'O'.repeat(64), locality: 'L'.repeat(128), registrationNumber: '1'.repeat(64) }),
    ).toEqual([]);
    expect(lint('tls-ov', { organization: '株式会社 Example' })).toEqual([]);
  });

  it.each([
    [
      'fail/registration-number-umlaut',
      'tls-ev',
      { registrationNumber: 'HRB 12345 Ü' },
      /^certificate lint: subject serialNumber \(registrationNumber\) "HRB 12345 Ü" has characters a PrintableString cannot hold \("Ü"\)/,
    ],
    [
      'fail/registration-number-outside-latin1',
      'tls-ev',
      { registrationNumber: 'KRS 0000ł12' },
      /serialNumber \(registrationNumber\) .* PrintableString cannot hold \("ł"\)/,
    ],
    [
      'fail/registration-number-symbols',
      'tls-ev',
      { registrationNumber: 'HRB_123&45*' },
      /PrintableString cannot hold \("_" "&" "\*"\): it may use only A-Z a-z 0-9/,
    ],
    [
      'fail/registration-number-too-long',
      'tls-ev',
      { registrationNumber: '1'.repeat(65) },
      /serialNumber \(registrationNumber\) "1+" has 65 characters, more than the 64 allowed/,
    ],
    [
      'fail/jurisdiction-country-lower-case',
      'tls-ev',
      { jurisdictionCountry: 'de' },
      /jurisdictionCountryName \(jurisdictionCountry\) "de" is not an ISO 3166 two-letter code/,
    ],
    [
      'fail/jurisdiction-country-name',
      'tls-ev',
      { jurisdictionCountry: 'Deutschland' },
      /jurisdictionCountryName \(jurisdictionCountry\) "Deutschland" is not an ISO 3166/,
    ],
    [
      'fail/jurisdiction-country-non-printable',
      'tls-ev',
      { jurisdictionCountry: 'DÉ' },
      /jurisdictionCountryName .* PrintableString cannot hold \("É"\)/,
    ],
    [
      'fail/country-name',
      'tls-ov',
      { country: 'Germany' },
      /countryName \(country\) "Germany" is not an ISO 3166 two-letter code/,
    ],
    [
      'fail/organization-lone-surrogate',
      'tls-ov',
      { organization: 'Bad \ud800 Org' },
      /organizationName \(organization\) .* is not well-formed Unicode/,
    ],
    [
      'fail/organization-too-long',
      'tls-ov',
      { organization: 'Ö'.repeat(65) },
      /organizationName \(organization\) .* has 65 characters, more than the 64 allowed/,
    ],
    [
      'fail/organization-control-character',
      'tls-ov',
      { organization: 'Acme\u0000 GmbH' },
      /organizationName \(organization\) .* has control characters/,
    ],
    [
      'fail/postal-code-too-long',
      'tls-ov',
      { postalCode: '9'.repeat(41) },
      /postalCode \(postalCode\) .* more than the 40 allowed/,
    ],
    [
      'fail/locality-too-long',
      'codesign',
      { locality: 'L'.repeat(129) },
      /localityName \(locality\) .* more than the 128 allowed/,
    ],
  ] as const)('%s', (_id, profile, org, message) => {
    const faults = lint(profile, org);
    expect(faults).toHaveLength(1);
    expect(faults[0]).toMatch(message);
  });

  it('fail/assertLintClean throws invalidInput listing every value that does not fit, before anything is encoded', () => {
    const req = {
      csr: undefined as never,
      product: PRODUCT,
      dnsNames: ['www.example.com'],
      organization: { ...EV, registrationNumber: 'HRB Ü', jurisdictionCountry: 'de' },
    };
    const template = leafTemplate(PROFILES['tls-ev'], req, NOW, key);
    expect(() => name(template.subject)).toThrow(RangeError);
    let error: unknown;
    try {
      assertLintClean(template, { now: NOW });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(CertdeskError);
    expect(error).toMatchObject({
      kind: 'invalidInput',
      message: expect.stringMatching(/jurisdictionCountryName.*; certificate lint: subject serialNumber/),
    });
  });

  it('fail/non-ASCII dNSNames and mailboxes, where no public-name rule covers them', () => {
    const idn = lint('codesign', {}, { dnsNames: ['bücher.example'] });
    expect(idn.some((m) => /bücher\.example: not ASCII \(a dNSName is an IA5String: use the A-label\)/.test(m))).toBe(
      true,
    );
    expect(lint('smime', {}, { dnsNames: [], emails: ['jürgen@example.com'] })).toEqual([
      'certificate lint: jürgen@example.com is not a mailbox address',
    ]);
  });

  it('ok/subjectValueProblem names attributes without a source by their X.520 name', () => {
    expect(subjectValueProblem({ type: OID.emailAddress, value: 'jürgen@example.com' })).toBe(
      'subject emailAddress "jürgen@example.com" has characters an IA5String cannot hold: it must be ASCII',
    );
    expect(subjectValueProblem({ type: OID.commonName, value: 'www.example.com' })).toBeUndefined();
  });
});
