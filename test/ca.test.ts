import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { createPrivateKey } from 'node:crypto';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/index.js';
import { SIGNATURE_HASH_ALGORITHMS, type SignatureHashAlgorithm } from '../src/core/index.js';
import { checkCsr, OCSP_MEMORY_SECONDS, type CheckedCsr, type IssueRequest } from '../src/ca/index.js';
import { createServices } from '../src/main.js';
import { CaRepo } from '../src/storage/index.js';
import { createTestContext, type TestContext } from './support/app.js';
import { testDialects, waitUntilBlockedBy } from './support/databases.js';
import { ocspAsOf, verifyAsOf } from './support/openssl-checks.js';
import { allowCrlWrites, refuseCrlWrites } from './support/refusals.js';

const dir = mkdtempSync(join(tmpdir(), 'certdesk-ca-'));
const file = (name: string, text: string | Uint8Array) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};
/** Runs openssl; returns stdout+stderr and the exit status (never throws). */
function openssl(args: string[], input?: Uint8Array): { out: string; status: number } {
  const r = spawnSync('openssl', args, { input, encoding: 'utf8' });
  return { out: `${r.stdout}${r.stderr}`, status: r.status ?? -1 };
}

/** openssl that talks to our own listener: asynchronous, so the server in this process can answer. */
function opensslAsync(args: string[]): Promise<{ out: string; status: number }> {
  return new Promise((resolve) => {
    execFile('openssl', args, { encoding: 'utf8', timeout: 15_000 }, (err, stdout, stderr) => {
      resolve({ out: `${stdout}${stderr}`, status: err === null ? 0 : typeof err.code === 'number' ? err.code : -1 });
    });
  });
}

let csrCount = 0;
function makeCsr(key: 'rsa' | 'ec', names: string[]): string {
  const n = ++csrCount;
  const keyArgs = key === 'rsa' ? ['-newkey', 'rsa:2048'] : ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256'];
  const out = join(dir, `req-${n}.csr`);
  execFileSync(
    'openssl',
    [
      'req',
      '-new',
      ...keyArgs,
      '-nodes',
      '-keyout',
      join(dir, `key-${n}.pem`),
      '-subj',
      `/CN=${names[0]}`,
      '-addext',
      `subjectAltName=${names.map((x) => `DNS:${x}`).join(',')}`,
      '-out',
      out,
    ],
    { stdio: 'pipe' },
  );
  return readFileSync(out, 'utf8');
}

const NAMES = ['www.example.com', 'example.com'];
const ORG = { organization: 'Acme Widgets GmbH', country: 'DE', state: 'Berlin', locality: 'Berlin' };
const EV_ORG = {
  ...ORG,
  businessCategory: 'Private Organization',
  registrationNumber: 'HRB 12345',
  jurisdictionCountry: 'DE',
};

console.warn(
  'built-in CA on sqlite: the OCSP store-while-revoking test runs on PostgreSQL only (SQLite has one writer at a time: nothing to interleave)',
);

describe.each(testDialects())('built-in CA on $dialect', (dialect) => {
  let t: TestContext;
  let rsa: CheckedCsr;
  let ec: CheckedCsr;
  const dv = (brand: string) => ({ code: `${brand}.DV`, brand, type: 'SSL' as const, validationLevel: 'DV' as const });
  const count = async () =>
    Number(
      (
        await t.db.kysely
          .selectFrom('certificates')
          .select((e) => e.fn.countAll().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
  const issue = (r: Partial<IssueRequest> & Pick<IssueRequest, 'csr'>) =>
    t.services.ca.issue({ product: dv('TrustPoint'), dnsNames: NAMES, ...r });
  /** openssl verify of a leaf with its delivered intermediates against the chain's root. */
  const verify = (leaf: string, intermediate: string, root: string, extra: string[] = []) =>
    openssl([
      'verify',
      ...verifyAsOf(t.clock.nowSeconds()),
      ...extra,
      '-CAfile',
      file('root.pem', root),
      ...(intermediate === '' ? [] : ['-untrusted', file('int.pem', intermediate)]),
      file('leaf.pem', leaf),
    ]);

  beforeAll(async () => {
    t = await createTestContext(dialect);
    await t.services.ca.init({ rsaRootBits: 2048, rsaIntermediateBits: 2048 });
    rsa = checkCsr(makeCsr('rsa', NAMES));
    ec = checkCsr(makeCsr('ec', NAMES));
  }, 120_000);
  afterAll(async () => t.close());

  describe('hierarchy and chains', () => {
    it('ok/every brand has its roots, intermediates and the cross-signed ECC intermediate; the legacy root only where SHA2-256 is offered', () => {
      const ids = t.services.ca.list().map((c) => c.id);
      for (const role of ['rsa-root', 'ecc-root', 'rsa-int', 'ecc-int', 'ecc-int-x']) {
        expect(ids).toContain(`trustpoint-${role}-1`);
        expect(ids).toContain(`sectra-${role}-1`);
      }
      expect(ids).toContain('trustpoint-legacy-root-1');
      expect(ids).not.toContain('sectra-legacy-root-1');
      expect(ids).toContain('trustpoint-codesign-int-1');
    });

    it('ok/ca init again creates nothing', async () => {
      expect(await t.services.ca.init({ rsaRootBits: 2048 })).toEqual([]);
    });

    const cases = [
      ...['TrustPoint', 'Sectra'].flatMap((brand) =>
        SIGNATURE_HASH_ALGORITHMS.flatMap((sha) => (['rsa', 'ec'] as const).map((key) => ({ brand, sha, key }))),
      ),
    ];
    it.each(cases)(
      'openssl verify: $brand $sha with an $key key',
      async ({ brand, sha, key }) => {
        const offered = t.services.catalog.brand(brand).signatureHashAlgorithms.includes(sha);
        const eccOnly = sha === 'SHA256-ECC-HYBRID' || sha === 'SHA256-ECC-FULL';
        const before = await count();
        const run = () =>
          issue({
            csr: key === 'rsa' ? rsa : ec,
            product: dv(brand),
            signatureHashAlgorithm: sha as SignatureHashAlgorithm,
          });
        if (!offered || (eccOnly && key === 'rsa')) {
          await expect(run()).rejects.toMatchObject({
            kind: 'invalidInput',
            field: 'SignatureHashAlgorithm',
            message: expect.stringMatching(offered ? /ECC keys/ : /not offered/),
          });
          expect(await count()).toBe(before);
          return;
        }
        const c = await run();
        const chain = t.services.ca.chain(brand, sha as SignatureHashAlgorithm);
        expect(c.certificate.endsWith('-----END CERTIFICATE-----\n')).toBe(true);
        expect(c.intermediate).toBe(chain.intermediates.join(''));
        expect(c.intermediate).not.toContain(chain.root.trim());
        const v = verify(c.certificate, c.intermediate, chain.root);
        expect(v.out).toContain(': OK');
        expect(v.status).toBe(0);
        // The chain is the one DESIGN §5.7 names for the algorithm.
        const rootRole = {
          'SHA256-FULL-CHAIN': 'rsa-root',
          'SHA256-ECC-HYBRID': 'rsa-root',
          'SHA256-ECC-FULL': 'ecc-root',
          'SHA2-256': 'legacy-root',
        }[sha]!;
        expect(c.chainIds.at(-1)).toBe(`${brand.toLowerCase()}-${rootRole}-1`);
        expect(await count()).toBe(before + 1);
      },
      30_000,
    );
  });

  describe('profiles', () => {
    it('ok/DV: openssl x509 -text shows the profile: serverAuth only, SANs, key usage by key type, policy, CRL and OCSP links, ≥ 64-bit serial, 200 days', async () => {
      const c = await issue({ csr: rsa });
      const text = openssl(['x509', '-noout', '-text', '-in', file('dv.pem', c.certificate)]).out;
      expect(text).toMatch(/Subject: CN ?= ?www\.example\.com\n/);
      expect(text).toMatch(/X509v3 Extended Key Usage: *\n *TLS Web Server Authentication\n/);
      expect(text).toMatch(/X509v3 Key Usage: critical\n *Digital Signature, Key Encipherment\n/);
      expect(text).toMatch(/X509v3 Basic Constraints: critical\n *CA:FALSE/);
      expect(text).toContain('DNS:www.example.com, DNS:example.com');
      expect(text).toContain('Policy: 2.23.140.1.2.1');
      expect(text).toContain(`URI:${t.services.config.publicUrl}/crl/trustpoint-rsa-int-1.crl`);
      expect(text).toContain(`OCSP - URI:${t.services.config.publicUrl}/ocsp`);
      expect(text).toContain(`CA Issuers - URI:${t.services.config.publicUrl}/pki/trustpoint-rsa-int-1.crt`);
      expect(text).toMatch(/X509v3 Subject Key Identifier/);
      expect(text).toMatch(/X509v3 Authority Key Identifier/);
      expect(c.serial.length).toBeGreaterThanOrEqual(18);
      expect(c.notAfter - c.notBefore + 1).toBe(200 * 86400);
      const ecText = openssl([
        'x509',
        '-noout',
        '-text',
        '-in',
        file('dv-ec.pem', (await issue({ csr: ec })).certificate),
      ]).out;
      expect(ecText).toMatch(/X509v3 Key Usage: critical\n *Digital Signature\n/);
    });

    it('ok/OV and EV subjects come from the vetted organization; EV carries jurisdiction and registration', async () => {
      const ov = await issue({
        csr: rsa,
        product: { code: 'TrustPoint.OV', brand: 'TrustPoint', type: 'SSL', validationLevel: 'OV' },
        organization: ORG,
      });
      const ovText = openssl(['x509', '-noout', '-text', '-in', file('ov.pem', ov.certificate)]).out;
      expect(ovText).toMatch(
        /Subject: C ?= ?DE, ST ?= ?Berlin, L ?= ?Berlin, O ?= ?Acme Widgets GmbH, CN ?= ?www\.example\.com/,
      );
      expect(ovText).toContain('Policy: 2.23.140.1.2.2');
      const ev = await issue({
        csr: rsa,
        product: { code: 'TrustPoint.EV', brand: 'TrustPoint', type: 'SSL', validationLevel: 'EV' },
        organization: EV_ORG,
      });
      const evText = openssl([
        'x509',
        '-noout',
        '-text',
        '-nameopt',
        'oneline',
        '-in',
        file('ev.pem', ev.certificate),
      ]).out;
      expect(evText).toContain('businessCategory = Private Organization');
      expect(evText).toContain('jurisdictionC = DE');
      expect(evText).toContain('serialNumber = HRB 12345');
      expect(evText).toContain('Policy: 2.23.140.1.1');
    });

    it('ok/code signing and S/MIME chain to their own intermediates with their own EKU', async () => {
      const cs = await t.services.ca.issue({
        csr: rsa,
        product: { code: 'TrustPoint.CodeSigning', brand: 'TrustPoint', type: 'CODESIGN', validationLevel: null },
        organization: ORG,
      });
      const csText = openssl(['x509', '-noout', '-text', '-in', file('cs.pem', cs.certificate)]).out;
      expect(csText).toMatch(/Extended Key Usage: *\n *Code Signing\n/);
      expect(csText).not.toContain('DNS:');
      const root = t.services.ca.chain('TrustPoint', 'SHA256-FULL-CHAIN', 'CODESIGN').root;
      // OpenSSL 3.0 has no codesign purpose: the chain verifies, and the EKU above is the profile's.
      expect(verify(cs.certificate, cs.intermediate, root).out).toContain(': OK');
      expect(openssl(['x509', '-noout', '-text', '-in', file('cs-int.pem', cs.intermediate)]).out).toMatch(
        /Extended Key Usage: *\n *Code Signing\n/,
      );
      const sm = await t.services.ca.issue({
        csr: ec,
        product: { code: 'TrustPoint.SMIME', brand: 'TrustPoint', type: 'SMIME', validationLevel: null },
        emails: ['alice@example.com'],
      });
      const smText = openssl(['x509', '-noout', '-text', '-in', file('sm.pem', sm.certificate)]).out;
      expect(smText).toContain('email:alice@example.com');
      expect(verify(sm.certificate, sm.intermediate, root, ['-purpose', 'smimesign']).out).toContain(': OK');
      // A TLS intermediate does not vouch for S/MIME.
      const tls = t.services.ca.chain('TrustPoint', 'SHA256-FULL-CHAIN');
      expect(verify(sm.certificate, tls.intermediates.join(''), tls.root).status).not.toBe(0);
    });

    it('ok/PKCS#7: openssl pkcs7 -print_certs lists the leaf and the intermediates', async () => {
      const c = await issue({ csr: ec, signatureHashAlgorithm: 'SHA256-ECC-HYBRID' });
      expect(c.pkcs7).toMatch(/^-----BEGIN PKCS7-----\n[\s\S]+\n-----END PKCS7-----\n$/);
      const out = openssl(['pkcs7', '-print_certs', '-noout', '-in', file('b.p7b', c.pkcs7)]).out;
      expect(out.match(/subject=/g)).toHaveLength(2);
      expect(out).toMatch(/subject=CN ?= ?www\.example\.com/);
      expect(out).toMatch(/subject=O ?= ?TrustPoint CA, CN ?= ?TrustPoint CA ECC TLS CA 1/);
    });

    it.each([
      ['an IP address', ['192.0.2.1'], /IP addresses/],
      ['an internal name', ['intranet.local', 'server.corp'], /internal name/],
      ['a single label', ['localhost'], /fully qualified/],
      ['a wildcard on a public suffix', ['*.co.uk'], /public suffix/],
      ['a bad label', ['bad_name.example.com'], /valid host name/],
    ])('fail/lint refuses %s and nothing is signed', async (_case, names, message) => {
      const before = await count();
      await expect(issue({ csr: rsa, dnsNames: names })).rejects.toMatchObject({
        kind: 'invalidName',
        message: expect.stringMatching(message),
      });
      expect(await count()).toBe(before);
    });

    it('fail/lint refuses a DV subject with an organization, an OV without one and an EV without jurisdiction', async () => {
      const before = await count();
      await expect(
        issue({
          csr: rsa,
          organization: ORG,
          product: { code: 'TrustPoint.OV', brand: 'TrustPoint', type: 'SSL', validationLevel: 'OV' },
          commonName: 'other.example.com',
        }),
      ).rejects.toMatchObject({ message: /commonName other\.example\.com is not among/ });
      await expect(
        issue({
          csr: rsa,
          product: { code: 'TrustPoint.OV', brand: 'TrustPoint', type: 'SSL', validationLevel: 'OV' },
        }),
      ).rejects.toMatchObject({ message: /vetted organization/ });
      await expect(
        issue({
          csr: rsa,
          organization: ORG,
          product: { code: 'TrustPoint.EV', brand: 'TrustPoint', type: 'SSL', validationLevel: 'EV' },
        }),
      ).rejects.toMatchObject({ message: /EV needs/ });
      expect(await count()).toBe(before);
    });

    it('ok/the lifetime is capped by the schedule on the issue date and by the requested end', async () => {
      const c = await issue({ csr: ec, notAfter: t.clock.nowSeconds() + 30 * 86400 });
      expect(c.notAfter).toBe(t.clock.nowSeconds() + 30 * 86400);
      const saved = t.clock.nowSeconds();
      t.clock.set(Date.parse('2027-03-15T00:00:00Z') / 1000);
      try {
        const later = await issue({ csr: ec });
        expect(later.notAfter - later.notBefore + 1).toBe(100 * 86400);
      } finally {
        t.clock.set(saved);
      }
    });

    it('ok/an audit event before and after each signing', async () => {
      const c = await issue({ csr: ec });
      const rows = await t.db.kysely
        .selectFrom('audit_events')
        .select(['action'])
        .where('subject', '=', c.serial)
        .orderBy('id')
        .execute();
      expect(rows.map((r) => r.action)).toEqual(['ca.sign.begin', 'ca.sign.done']);
    });
  });

  describe('revocation: CRL and OCSP', () => {
    let url: string;
    beforeAll(async () => {
      await t.app.listen({ host: '127.0.0.1', port: 0 });
      url = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    });

    it('ok/openssl verify -crl_check rejects the revoked leaf and accepts the other; the CRL number grows', async () => {
      const good = await issue({ csr: ec, signatureHashAlgorithm: 'SHA256-ECC-HYBRID' });
      const bad = await issue({ csr: ec, signatureHashAlgorithm: 'SHA256-ECC-HYBRID' });
      const chain = t.services.ca.chain('TrustPoint', 'SHA256-ECC-HYBRID');
      const first = await fetch(`${url}/crl/${good.issuerId}.crl`);
      expect(first.status).toBe(200);
      expect(first.headers.get('content-type')).toBe('application/pkix-crl');
      const numberOf = (der: Uint8Array) =>
        /X509v3 CRL Number: *\n *(\d+)/.exec(
          openssl(['crl', '-inform', 'DER', '-noout', '-text', '-in', file('n.crl', der)]).out,
        )![1];
      const n1 = Number(numberOf(new Uint8Array(await first.arrayBuffer())));

      const r = await t.services.ca.revoke(bad.serial, 'keyCompromise', { actor: 'operator' });
      expect(r).toMatchObject({ alreadyRevoked: false, reason: 1 });
      const crl = new Uint8Array(await (await fetch(`${url}/crl/${good.issuerId}.crl`)).arrayBuffer());
      expect(Number(numberOf(crl))).toBeGreaterThan(n1);
      const crlPem = openssl(['crl', '-inform', 'DER', '-in', file('c.crl', crl)]).out;
      const crlFile = file('crl.pem', crlPem);
      expect(
        openssl([
          'crl',
          '-in',
          crlFile,
          '-noout',
          '-CAfile',
          file('int-ca.pem', chain.intermediates.join('') + chain.root),
        ]).out,
      ).toContain('verify OK');
      const revoked = verify(bad.certificate, bad.intermediate, chain.root, ['-crl_check', '-CRLfile', crlFile]);
      expect(revoked.status).not.toBe(0);
      expect(revoked.out).toContain('certificate revoked');
      const ok = verify(good.certificate, good.intermediate, chain.root, ['-crl_check', '-CRLfile', crlFile]);
      expect(ok.out).toContain(': OK');
      // Revoking again keeps the first time and reason, and writes nothing (not even an audit event).
      expect(await t.services.ca.revoke(bad.serial, 'superseded')).toMatchObject({
        alreadyRevoked: true,
        reason: 1,
        change: 'none',
      });
      const actions = (
        await t.db.kysely
          .selectFrom('audit_events')
          .select('action')
          .where('subject', '=', bad.serial)
          .orderBy('id')
          .execute()
      ).map((x) => x.action);
      expect(actions).toEqual(['ca.sign.begin', 'ca.sign.done', 'ca.revoke.begin', 'ca.revoke.done']);
    });

    it('ok/openssl ocsp against the running responder: good, then revoked, each with Response verify OK', async () => {
      const c = await issue({ csr: rsa });
      const chain = t.services.ca.chain('TrustPoint', 'SHA256-FULL-CHAIN');
      const args = [
        'ocsp',
        '-issuer',
        file('ocsp-int.pem', c.intermediate),
        '-cert',
        file('ocsp-leaf.pem', c.certificate),
        '-url',
        `${url}/ocsp`,
        '-CAfile',
        file('ocsp-root.pem', chain.root),
        ...ocspAsOf(t.clock.nowSeconds()),
      ];
      const good = await opensslAsync(args);
      expect(good.out).toContain('Response verify OK');
      expect(good.out).toMatch(/ocsp-leaf\.pem: good/);
      await t.services.ca.revoke(c.serial, 'cessationOfOperation');
      const revoked = await opensslAsync(args);
      expect(revoked.out).toContain('Response verify OK');
      expect(revoked.out).toMatch(/ocsp-leaf\.pem: revoked/);
      expect(revoked.out).toContain('Reason: cessationOfOperation');
    });

    it('ok/OCSP over GET (RFC 6960 A.1) answers like POST, from the cache', async () => {
      const c = await issue({ csr: ec });
      const req = join(dir, 'get.req');
      openssl([
        'ocsp',
        '-issuer',
        file('g-int.pem', c.intermediate),
        '-cert',
        file('g-leaf.pem', c.certificate),
        '-reqout',
        req,
        '-no_nonce',
      ]);
      const b64 = readFileSync(req).toString('base64');
      const post = Buffer.from(
        await (
          await fetch(`${url}/ocsp`, {
            method: 'POST',
            body: readFileSync(req),
            headers: { 'content-type': 'application/ocsp-request' },
          })
        ).arrayBuffer(),
      );
      const get = await fetch(`${url}/ocsp/${encodeURIComponent(b64)}`);
      expect(get.status).toBe(200);
      expect(get.headers.get('content-type')).toBe('application/ocsp-response');
      expect(Buffer.from(await get.arrayBuffer()).equals(post)).toBe(true);
      const text = openssl(['ocsp', '-respin', file('g.resp', post), '-resp_text', '-noverify']).out;
      expect(text).toContain('Cert Status: good');
    });

    /** Asks the responder (GET) about `c` with one request made once, without a nonce: openssl's reading of each answer. */
    const sameRequestAsker = (name: string, c: { intermediate: string; certificate: string }) => {
      const req = join(dir, `${name}.req`);
      openssl([
        'ocsp',
        '-issuer',
        file(`${name}-int.pem`, c.intermediate),
        '-cert',
        file(`${name}-leaf.pem`, c.certificate),
        '-reqout',
        req,
        '-no_nonce',
      ]);
      return async () => {
        const res = await fetch(`${url}/ocsp/${encodeURIComponent(readFileSync(req).toString('base64'))}`);
        const answer = file(`${name}.resp`, Buffer.from(await res.arrayBuffer()));
        return openssl(['ocsp', '-respin', answer, '-resp_text', '-noverify']).out;
      };
    };

    it('ok/the same request bytes (no nonce), asked again after a revocation, are answered revoked', async () => {
      const c = await issue({ csr: ec });
      const ask = sameRequestAsker('again', c);
      // Asked twice: the second answer comes from memory, by the request's bytes.
      expect(await ask()).toContain('Cert Status: good');
      expect(await ask()).toContain('Cert Status: good');
      await t.services.ca.revoke(c.serial, 'keyCompromise');
      const after = await ask();
      expect(after).toContain('Cert Status: revoked');
      expect(after).toContain('Revocation Reason: keyCompromise');
    });

    it('ok/a revocation whose clear never reached this process (its revoker killed after the commit) is answered within OCSP_MEMORY_SECONDS', async () => {
      const c = await issue({ csr: ec });
      const ask = sameRequestAsker('unheard', c);
      expect(await ask()).toContain('Cert Status: good');
      // Signed once and stored (while the leaf is still as it was read), then answered from memory.
      expect(
        await t.db.kysely.selectFrom('ocsp_responses').select('serial').where('serial', '=', c.serial).execute(),
      ).toEqual([{ serial: c.serial }]);
      // What another process's revocation commits (revokeLeaf's transaction: the record and the
      // stored answers dropped), with the news to forget the answers in memory never sent.
      const at = t.clock.nowSeconds();
      await t.db.kysely.transaction().execute(async (tx) => {
        await tx
          .updateTable('certificates')
          .set({ revoked_at: at, revocation_reason: 1 })
          .where('serial', '=', c.serial)
          .execute();
        await tx.deleteFrom('ocsp_responses').where('serial', '=', c.serial).execute();
      });
      expect(await ask()).toContain('Cert Status: good'); // from memory, for now
      t.clock.advance(OCSP_MEMORY_SECONDS);
      try {
        const after = await ask();
        expect(after).toContain('Cert Status: revoked');
        expect(after).toContain('Revocation Reason: keyCompromise');
      } finally {
        t.clock.advance(-OCSP_MEMORY_SECONDS);
      }
    });

    it.skipIf(dialect.dialect !== 'postgres')(
      'ok/an answer built before a revocation that commits while it is stored is not kept: the stored state stays the revocation (PostgreSQL waits for the row)',
      async () => {
        const c = await issue({ csr: ec });
        const ask = sameRequestAsker('inflight', c);
        // Another process's revocation, in progress: the row updated (and locked), the stored answers dropped, not committed.
        const other = new pg.Client({ connectionString: t.db.url! });
        await other.connect();
        try {
          await other.query('BEGIN');
          const { rows } = await other.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
          await other.query('UPDATE certificates SET revoked_at = $1, revocation_reason = 1 WHERE serial = $2', [
            t.clock.nowSeconds(),
            c.serial,
          ]);
          await other.query('DELETE FROM ocsp_responses WHERE serial = $1', [c.serial]);
          // The responder reads the leaf as committed (good), signs, and must wait for the row to store it.
          const answering = ask();
          await waitUntilBlockedBy(t.db, rows[0]!.pid);
          await other.query('COMMIT');
          expect(await answering).toContain('Cert Status: good');
        } finally {
          await other.end();
        }
        t.clock.advance(OCSP_MEMORY_SECONDS);
        try {
          const after = await ask();
          expect(after).toContain('Cert Status: revoked');
        } finally {
          t.clock.advance(-OCSP_MEMORY_SECONDS);
        }
      },
    );

    it('fail/never good for a serial it did not issue, an unknown issuer or garbage', async () => {
      const c = await issue({ csr: ec });
      const chain = t.services.ca.chain('TrustPoint', 'SHA256-FULL-CHAIN');
      const unknown = await opensslAsync([
        'ocsp',
        '-issuer',
        file('u-int.pem', c.intermediate),
        '-serial',
        '0x7A5B3C1D2E4F60718293',
        '-url',
        `${url}/ocsp`,
        '-CAfile',
        file('u-root.pem', chain.root),
      ]);
      expect(unknown.out).toMatch(/unauthorized/i);
      expect(unknown.out).not.toMatch(/: good/);
      const otherIssuer = await opensslAsync([
        'ocsp',
        '-issuer',
        file('u-root2.pem', chain.root),
        '-cert',
        file('u-leaf.pem', c.certificate),
        '-url',
        `${url}/ocsp`,
        '-noverify',
      ]);
      expect(otherIssuer.out).toMatch(/unauthorized/i);
      for (const body of [Buffer.alloc(0), Buffer.from('garbage'), Buffer.from([0x30, 0x03, 0x02, 0x01])]) {
        const res = await fetch(`${url}/ocsp`, {
          method: 'POST',
          body,
          headers: { 'content-type': 'application/ocsp-request' },
        });
        expect(res.status).toBe(200);
        const text = openssl([
          'ocsp',
          '-respin',
          file('m.resp', Buffer.from(await res.arrayBuffer())),
          '-resp_text',
          '-noverify',
        ]).out;
        expect(text).toMatch(/malformedrequest/i);
      }
      expect((await fetch(`${url}/ocsp/%%%`)).status).toBeLessThan(500);
    });

    it('ok/the periodic job re-signs CRLs past half their validity with a higher number, and is scheduled once', async () => {
      const repo = new CaRepo(t.db);
      const keyId = 'sectra-ecc-int-1';
      await t.services.ca.crl(keyId);
      const first = (await repo.crl(keyId))!;
      expect(first.nextUpdate - first.thisUpdate).toBe(7 * 86400);
      expect(await t.services.ca.refreshDueCrls()).not.toContain(keyId);
      const saved = t.clock.nowSeconds();
      t.clock.set(saved + 4 * 86400);
      try {
        expect(await t.services.ca.refreshDueCrls()).toContain(keyId);
        const second = (await repo.crl(keyId))!;
        expect(second.number).toBeGreaterThan(first.number);
        expect(second.thisUpdate).toBe(saved + 4 * 86400);
      } finally {
        t.clock.set(saved);
      }
      await t.services.pki.schedule();
      await t.services.pki.schedule();
      const jobs = await t.db.kysely.selectFrom('jobs').select('name').where('name', '=', 'ca.refresh-crls').execute();
      expect(jobs).toHaveLength(1);
    });

    it('fail/a revocation whose CRL could not be signed stands (OCSP says revoked at once), and the periodic job re-signs the lagging CRL with its entry', async () => {
      const repo = new CaRepo(t.db);
      const leaf = await issue({ csr: ec, signatureHashAlgorithm: 'SHA256-ECC-HYBRID' });
      await t.services.ca.crl(leaf.issuerId);
      const before = (await repo.crl(leaf.issuerId))!;
      const chain = t.services.ca.chain('TrustPoint', 'SHA256-ECC-HYBRID');
      const ocspStatus = async () =>
        (
          await opensslAsync([
            'ocsp',
            '-issuer',
            file('lag-int.pem', leaf.intermediate),
            '-cert',
            file('lag-leaf.pem', leaf.certificate),
            '-url',
            `${url}/ocsp`,
            '-CAfile',
            file('lag-root.pem', chain.root),
            ...ocspAsOf(t.clock.nowSeconds()),
          ])
        ).out;
      // Answered once: the signed "good" is now held in memory.
      expect(await ocspStatus()).toMatch(/lag-leaf\.pem: good/);
      // A real failure between the revocation's commit and its CRL: the database refuses CRL writes.
      await refuseCrlWrites(t.db);
      try {
        expect(await t.services.ca.revoke(leaf.serial, 'keyCompromise')).toMatchObject({
          change: 'revoked',
          crlFailure: expect.stringMatching(/crl refused/),
        });
      } finally {
        await allowCrlWrites(t.db);
      }
      expect(await repo.leafBySerial(leaf.serial)).toMatchObject({ revokedAt: expect.any(Number), reason: 1 });
      // OCSP says so at once: the answers held in memory were dropped despite the failure.
      expect(await ocspStatus()).toMatch(/lag-leaf\.pem: revoked/);
      expect((await repo.crl(leaf.issuerId))!.number).toBe(before.number);
      // Not due for days, but it lags the revocations of its key: the job re-signs it now.
      expect(await t.services.ca.refreshDueCrls()).toContain(leaf.issuerId);
      const after = (await repo.crl(leaf.issuerId))!;
      expect(after.number).toBeGreaterThan(before.number);
      const text = openssl([
        'crl',
        '-inform',
        'DER',
        '-noout',
        '-text',
        '-in',
        file('lag.crl', Buffer.from(after.der, 'base64')),
      ]).out;
      expect(text).toContain(`Serial Number: ${leaf.serial}`);
      // Caught up: the next run leaves it alone.
      expect(await t.services.ca.refreshDueCrls()).not.toContain(leaf.issuerId);
    });

    it('fail/revoking an unknown serial or with an unknown reason changes nothing', async () => {
      await expect(t.services.ca.revoke('0123456789ABCDEF01', 'keyCompromise')).rejects.toMatchObject({
        kind: 'notFound',
      });
      const c = await issue({ csr: ec });
      await expect(t.services.ca.revoke(c.serial, 'because')).rejects.toMatchObject({
        kind: 'invalidInput',
        field: 'RevokeReason',
      });
      expect(
        (
          await t.db.kysely
            .selectFrom('certificates')
            .select('revoked_at')
            .where('serial', '=', c.serial)
            .executeTakeFirstOrThrow()
        ).revoked_at,
      ).toBeNull();
    });

    it('ok/CA certificates are downloadable under /pki/ and unknown files are 404', async () => {
      const list = (await (await fetch(`${url}/pki/`)).json()) as { CACertificates: { ID: string; URL: string }[] };
      expect(list.CACertificates.length).toBeGreaterThanOrEqual(10);
      const der = Buffer.from(await (await fetch(`${url}/pki/trustpoint-rsa-root-1.crt`)).arrayBuffer());
      expect(openssl(['x509', '-inform', 'DER', '-noout', '-subject', '-in', file('root.der', der)]).out).toMatch(
        /TrustPoint CA RSA Root R1/,
      );
      const pemText = await (await fetch(`${url}/pki/trustpoint-rsa-root-1.pem`)).text();
      expect(openssl(['x509', '-noout', '-subject', '-in', file('root2.pem', pemText)]).out).toMatch(/RSA Root R1/);
      for (const path of ['/pki/nope.crt', '/pki/../etc/passwd', '/crl/nope.crl', '/crl/trustpoint-rsa-root-1.pem'])
        expect((await fetch(`${url}${path}`)).status).toBe(404);
    });
  });

  describe('keys at rest', () => {
    it('ok/a sealed CA key is not plaintext and the key file is 0600', async () => {
      const rows = await t.db.kysely.selectFrom('ca_keys').select(['id', 'sealed']).execute();
      expect(rows.length).toBeGreaterThanOrEqual(10);
      for (const row of rows) {
        const sealed = Buffer.from(row.sealed, 'base64');
        expect(() => createPrivateKey({ key: sealed, format: 'der', type: 'pkcs8' })).toThrow();
        expect(() => createPrivateKey({ key: sealed.subarray(28), format: 'der', type: 'pkcs8' })).toThrow();
        // A PKCS#8 structure starts SEQUENCE { INTEGER 0, …}: not to be found anywhere in the blob.
        expect(sealed.includes(Buffer.from([0x02, 0x01, 0x00, 0x30]))).toBe(false);
      }
      expect(statSync(t.services.config.caKeyFile!).mode & 0o777).toBe(0o600);
    });

    it('fail/a wrong key file stops the start with a clear message', async () => {
      const wrong = join(mkdtempSync(join(tmpdir(), 'certdesk-wrong-')), 'ca-keys.secret');
      const config = loadConfig({ CERTDESK_DATA_DIR: '/nonexistent-test-data', CERTDESK_CA_KEY_FILE: wrong });
      await expect(createServices(config, { db: t.db })).rejects.toThrow(
        /does not open CA key .*not the file the keys were sealed with/,
      );
      writeFileSync(wrong, 'not a key\n', { mode: 0o600 });
      await expect(createServices(config, { db: t.db })).rejects.toThrow(/does not hold a 256-bit key/);
    });
  });
});
