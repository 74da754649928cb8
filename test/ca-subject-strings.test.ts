import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkCsr, type CheckedCsr, type OrganizationSubject } from '../src/ca/index.js';
import { createTestContext, type TestContext } from './support/app.js';
import { testDialects } from './support/databases.js';
import { verifyAsOf } from './support/openssl-checks.js';

// Text the built-in CA puts into subjects fits its ASN.1 string type, or the leaf is refused by
// lint: never written malformed (a latin-1 byte or a truncated code point in a PrintableString).

const dir = mkdtempSync(join(tmpdir(), 'certdesk-subject-strings-'));
const file = (name: string, text: string) => {
  writeFileSync(join(dir, name), text);
  return join(dir, name);
};
const openssl = (args: string[]): { out: string; status: number } => {
  const r = spawnSync('openssl', args, { encoding: 'utf8' });
  return { out: `${r.stdout}${r.stderr}`, status: r.status ?? -1 };
};

const EV = { code: 'TrustPoint.EV', brand: 'TrustPoint', type: 'SSL' as const, validationLevel: 'EV' as const };
const OV = { ...EV, code: 'TrustPoint.OV', validationLevel: 'OV' as const };
const ORG: OrganizationSubject = {
  organization: 'Acme Widgets GmbH',
  country: 'DE',
  locality: 'Berlin',
  businessCategory: 'Private Organization',
  registrationNumber: 'HRB 12345',
  jurisdictionCountry: 'DE',
};

describe.each(testDialects())('subject strings of the built-in CA on $dialect', (dialect) => {
  let t: TestContext;
  let csr: CheckedCsr;
  const count = async () =>
    Number(
      (
        await t.db.kysely
          .selectFrom('certificates')
          .select((e) => e.fn.countAll().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
  const issue = (product: typeof EV | typeof OV, organization: OrganizationSubject) =>
    t.services.ca.issue({ csr, product, dnsNames: ['www.example.com'], organization });

  beforeAll(async () => {
    t = await createTestContext(dialect);
    await t.services.ca.init({ rsaRootBits: 2048, rsaIntermediateBits: 2048 });
    execFileSync(
      'openssl',
      [
        'req',
        '-new',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        join(dir, 'key.pem'),
        '-subj',
        '/CN=www.example.com',
        '-addext',
        'subjectAltName=DNS:www.example.com',
        '-out',
        join(dir, 'req.csr'),
      ],
      { stdio: 'pipe' },
    );
    csr = checkCsr(readFileSync(join(dir, 'req.csr'), 'utf8'));
  }, 120_000);
  afterAll(async () => t.close());

  it('ok/a UTF-8 organization name and a PrintableString registration number: openssl reads back exactly what was vetted', async () => {
    const org = {
      ...ORG,
      organization: 'Müller & Söhne Łódź GmbH',
      locality: 'Zürich',
      registrationNumber: "HRB 12345 (Abt. B/2) +'x'",
    };
    const c = await issue(EV, org);
    const pem = file('ok.pem', c.certificate);
    const chain = t.services.ca.chain('TrustPoint', 'SHA256-FULL-CHAIN');
    const verify = openssl([
      'verify',
      ...verifyAsOf(t.clock.nowSeconds()),
      '-CAfile',
      file('root.pem', chain.root),
      '-untrusted',
      file('int.pem', c.intermediate),
      pem,
    ]);
    expect(verify.out).toContain(': OK');
    const parsed = openssl(['asn1parse', '-in', pem]).out;
    expect(parsed).toMatch(/:serialNumber\n.*PRINTABLESTRING\s+:HRB 12345 \(Abt\. B\/2\) \+'x'\n/);
    expect(parsed).toMatch(/:jurisdictionCountryName\n.*PRINTABLESTRING\s+:DE\n/);
    expect(parsed).toMatch(/:organizationName\n.*UTF8STRING\s+:Müller & Söhne Łódź GmbH\n/);
    const subject = openssl(['x509', '-noout', '-subject', '-nameopt', 'oneline,-esc_msb,utf8', '-in', pem]).out;
    expect(subject).toContain('O = Müller & Söhne Łódź GmbH');
    expect(subject).toContain('L = Zürich');
    // Quoted by openssl because of the '+' (its multi-valued RDN separator).
    expect(subject).toContain(`serialNumber = "HRB 12345 (Abt. B/2) +'x'"`);
  });

  it.each([
    [
      'fail/registration-number-umlaut',
      EV,
      { registrationNumber: 'HRB 12345 Ü' },
      /serialNumber \(registrationNumber\) "HRB 12345 Ü" has characters a PrintableString cannot hold \("Ü"\)/,
    ],
    [
      'fail/registration-number-outside-latin1',
      EV,
      { registrationNumber: 'KRS 0000ł12' },
      /serialNumber \(registrationNumber\) "KRS 0000ł12" has characters a PrintableString cannot hold/,
    ],
    [
      'fail/registration-number-symbols',
      EV,
      { registrationNumber: 'HRB_123&45*' },
      /PrintableString cannot hold \("_" "&" "\*"\)/,
    ],
    [
      'fail/jurisdiction-country-not-a-code',
      EV,
      { jurisdictionCountry: 'Deutschland' },
      /jurisdictionCountryName \(jurisdictionCountry\) "Deutschland" is not an ISO 3166 two-letter code/,
    ],
    [
      'fail/organization-lone-surrogate',
      OV,
      { organization: 'Acme \ud800 GmbH' },
      /organizationName \(organization\) .* is not well-formed Unicode/,
    ],
    [
      'fail/organization-too-long',
      OV,
      { organization: 'Ä'.repeat(65) },
      /organizationName \(organization\) .* more than the 64 allowed/,
    ],
  ] as const)(
    '%s: refused by lint with the field named; no certificate recorded',
    async (_id, product, change, message) => {
      const before = await count();
      const outcome: unknown = await issue(product, { ...ORG, ...change }).then(
        (c) => c,
        (e: unknown) => e,
      );
      if (!(outcome instanceof Error)) {
        // What such a certificate holds (a latin-1 byte or a cut code point in a PrintableString, …), as openssl reads it.
        const strings = openssl([
          'asn1parse',
          '-in',
          file('issued.pem', (outcome as { certificate: string }).certificate),
        ])
          .out.split('\n')
          .filter((l) => /STRING/.test(l));
        expect.fail(`signed instead of refused; openssl asn1parse reads its strings as:\n${strings.join('\n')}`);
      }
      expect(outcome).toMatchObject({ kind: 'invalidInput', message: expect.stringMatching(message) });
      expect(await count()).toBe(before);
    },
  );
});
