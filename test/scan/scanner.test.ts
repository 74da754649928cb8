import { createServer, type Server } from 'node:http';
import { X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkCsr } from '../../src/ca/index.js';
import { scanHost, type HostReport, type ScanOptions } from '../../src/scan/index.js';
import { createTestContext, TEST_NOW, type TestContext } from '../support/app.js';
import { testDialects } from '../support/databases.js';
import {
  newKeyAndCsr,
  ocspRequest,
  requiredBinary,
  runSslscan,
  startSilentServer,
  startTlsNginx,
  type TlsSiteSpec,
} from '../support/tls-servers.js';
import { freePort, freePorts } from '../support/ports.js';
import type { RunningServer } from '../support/web-servers.js';

// Real nginx servers on loopback with certificates from certdesk's own CA, scanned by scanHost and
// by sslscan side by side. Every scanned name resolves to 127.0.0.1.
const NAME = 'www.certdesk-test.com';
const nginxBinary = requiredBinary('nginx');
const sslscanBinary = requiredBinary('sslscan');

type Config = 'good' | 'weak' | 'legacy' | 'expired' | 'wrong-name' | 'incomplete' | 'tls13-only';
const MODERN = 'ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305';

describe.skipIf(nginxBinary === undefined || sslscanBinary === undefined)('scanHost against nginx', () => {
  let t: TestContext;
  let nginx: RunningServer;
  let aia: Server;
  let root: string;
  const sites = new Map<Config, TlsSiteSpec>();
  const reports = new Map<Config, Extract<HostReport, { status: 'scanned' }>>();
  let goodLeaf: string;

  const options = (site: TlsSiteSpec): ScanOptions => ({
    lookup: async () => ['127.0.0.1'],
    allowPrivate: true,
    port: site.port,
    httpPort: site.httpPort,
    trustedRoots: [root],
    now: () => TEST_NOW + 3600,
    // A working server's scan ends when it is done; a generous bound keeps a loaded CI machine from failing it.
    timeoutMs: 60_000,
  });

  /** Scans a configuration once (printing the time it took) and keeps the report for the other checks. */
  async function scanned(config: Config): Promise<Extract<HostReport, { status: 'scanned' }>> {
    const cached = reports.get(config);
    if (cached !== undefined) return cached;
    const site = sites.get(config)!;
    const started = performance.now();
    const report = await scanHost({ name: NAME, orderCertificatePem: goodLeaf }, options(site));
    console.log(`scan ${config}: ${Math.round(performance.now() - started)} ms`);
    if (report.status !== 'scanned') throw new Error(`${config}: ${report.problem}\n${nginx.log()}`);
    reports.set(config, report);
    return report;
  }

  beforeAll(async () => {
    // The CA's AIA caIssuers links point at this server, which serves the intermediate (as the
    // service's /pki route would): the scanner fetches it when a server leaves it out.
    let intermediateDer = Buffer.alloc(0);
    let intermediatePath = '';
    aia = createServer((req, res) => {
      if (req.url === intermediatePath)
        res.writeHead(200, { 'content-type': 'application/pkix-cert' }).end(intermediateDer);
      else res.writeHead(404).end();
    });
    await new Promise<void>((r) => aia.listen(0, '127.0.0.1', r));
    const aiaPort = (aia.address() as { port: number }).port;
    t = await createTestContext(testDialects()[0]!, { CERTDESK_PUBLIC_URL: `http://127.0.0.1:${aiaPort}` });
    await t.services.ca.init({ rsaRootBits: 2048, rsaIntermediateBits: 2048 });
    const chain = t.services.ca.chain('TrustPoint', 'SHA256-FULL-CHAIN');
    root = chain.root;
    intermediateDer = new X509Certificate(chain.intermediates[0]!).raw;
    intermediatePath = `/pki/${chain.chainIds[0]}.crt`;
    const product = {
      code: 'TrustPoint.DV',
      brand: 'TrustPoint',
      type: 'SSL' as const,
      validationLevel: 'DV' as const,
    };
    const issue = async (names: string[]) => {
      const { keyPem, csrPem } = newKeyAndCsr(names);
      const issued = await t.services.ca.issue({ csr: checkCsr(csrPem), product, dnsNames: names });
      return { keyPem, leaf: issued.certificate, intermediate: issued.intermediate };
    };
    const good = await issue([NAME]);
    goodLeaf = good.leaf;
    const other = await issue(['other.certdesk-test.com']);
    // Issued 500 days before the scan's "now": past any lifetime the CA allows.
    t.clock.set(TEST_NOW - 500 * 86_400);
    const expired = await issue([NAME]);
    t.clock.set(TEST_NOW);
    const ocspDer = await t.services.ca.ocsp(ocspRequest(good.leaf, chain.intermediates[0]!));

    const base = { preferServerCiphers: true, redirect: true };
    const full = (c: { leaf: string; intermediate: string }) => `${c.leaf}${c.intermediate}`;
    const specs: Array<[Config, Omit<TlsSiteSpec, 'port' | 'httpPort'>]> = [
      [
        'good',
        {
          ...base,
          chainPem: full(good),
          keyPem: good.keyPem,
          protocols: 'TLSv1.2 TLSv1.3',
          ciphers: MODERN,
          hsts: 'max-age=31536000; includeSubDomains',
          ocspDer,
        },
      ],
      // Everything OpenSSL 3 can still serve (at SECLEVEL=0 for TLS 1.0/1.1), anonymous ECDH included.
      [
        'weak',
        {
          ...base,
          redirect: false,
          chainPem: full(good),
          keyPem: good.keyPem,
          protocols: 'TLSv1 TLSv1.1 TLSv1.2',
          ciphers: 'ALL:@SECLEVEL=0',
        },
      ],
      // CBC only, no forward secrecy, TLS 1.0 to 1.2: dated but not broken.
      [
        'legacy',
        {
          ...base,
          chainPem: full(good),
          keyPem: good.keyPem,
          protocols: 'TLSv1 TLSv1.1 TLSv1.2',
          ciphers: 'AES128-SHA:AES256-SHA:AES128-SHA256:@SECLEVEL=0',
          preferServerCiphers: false,
          hsts: 'max-age=31536000',
        },
      ],
      [
        'expired',
        { ...base, chainPem: full(expired), keyPem: expired.keyPem, protocols: 'TLSv1.2 TLSv1.3', ciphers: MODERN },
      ],
      [
        'wrong-name',
        { ...base, chainPem: full(other), keyPem: other.keyPem, protocols: 'TLSv1.2 TLSv1.3', ciphers: MODERN },
      ],
      [
        'incomplete',
        { ...base, chainPem: good.leaf, keyPem: good.keyPem, protocols: 'TLSv1.2 TLSv1.3', ciphers: MODERN },
      ],
      // The Certificate message is encrypted: the scanner reads it through node:tls.
      [
        'tls13-only',
        { ...base, chainPem: full(good), keyPem: good.keyPem, protocols: 'TLSv1.3', ciphers: MODERN, ocspDer },
      ],
    ];
    const ports = await freePorts(2 * specs.length);
    for (const [i, [config, spec]] of specs.entries())
      sites.set(config, { ...spec, port: ports[2 * i]!, httpPort: ports[2 * i + 1]! });
    nginx = await startTlsNginx(nginxBinary!, [...sites.values()]);
  }, 120_000);

  afterAll(async () => {
    await nginx?.stop();
    await t?.close();
    await new Promise((r) => aia?.close(r));
  });

  describe('agrees with sslscan', () => {
    it.each(['good', 'weak', 'legacy', 'expired', 'wrong-name', 'incomplete', 'tls13-only'] as const)(
      'ok/%s: the same protocol versions and accepted suites, and the same preferred suite',
      async (config) => {
        const report = await scanned(config);
        const theirs = await runSslscan(sslscanBinary!, NAME, sites.get(config)!.port);
        for (const p of report.protocols) {
          expect(p.offered, `${config} ${p.version}\n${theirs.output}`).toBe(theirs.protocols[p.version] ?? false);
          const ours = p.suites.map((s) => s.name);
          expect([...ours].sort(), `${config} ${p.version}`).toEqual([...(theirs.accepted[p.version] ?? [])].sort());
          if (p.serverPreference === true) expect(ours[0]).toBe(theirs.preferred[p.version]);
        }
      },
    );
  });

  describe('ratings and findings', () => {
    it('ok/good: TLS 1.2 and 1.3, AEAD with forward secrecy, HSTS a year, OCSP stapled: A+', async () => {
      const r = await scanned('good');
      expect(r.protocols.filter((p) => p.offered).map((p) => p.version)).toEqual(['TLSv1.2', 'TLSv1.3']);
      expect(r.protocols.flatMap((p) => p.suites).every((s) => s.classes.includes('aead'))).toBe(true);
      expect(r.certificate).toMatchObject({
        trusted: true,
        matchesName: true,
        expired: false,
        chainComplete: true,
        chainInOrder: true,
        keyType: 'RSA',
        keyBits: 2048,
        signatureAlgorithm: 'sha256WithRSAEncryption',
        isOrderCertificate: true,
        ocspStapled: true,
      });
      expect(r.certificate?.chainPem).toHaveLength(2);
      expect(r.handshake).toEqual({ secureRenegotiation: true, compression: false, fallbackScsv: true });
      expect(r.http.redirectsToHttps).toBe(true);
      expect(r.http.hsts).toEqual({ maxAge: 31536000, includeSubDomains: true, preload: false });
      expect(r.findings.filter((f) => ['critical', 'high', 'medium'].includes(f.severity))).toEqual([]);
      expect(r.rating.grade).toBe('A+');
    });

    it('fail/weak: TLS 1.0 and 1.1, CBC and anonymous suites, no HSTS: F, with a finding for each', async () => {
      const r = await scanned('weak');
      const ids = r.findings.map((f) => f.id);
      expect(ids).toEqual(
        expect.arrayContaining(['protocol.tls10', 'protocol.tls11', 'cipher.cbc', 'cipher.anonymous', 'http.no-hsts']),
      );
      expect(ids).toContain('http.no-redirect');
      expect(r.rating.grade).toBe('F');
      expect(r.rating.caps).toContain('TLS 1.0 offered: at most B');
    });

    it('fail/legacy: CBC only without forward secrecy on TLS 1.0 to 1.2: capped at B', async () => {
      const r = await scanned('legacy');
      const ids = r.findings.map((f) => f.id);
      expect(ids).toEqual(expect.arrayContaining(['protocol.tls10', 'cipher.cbc-only', 'cipher.no-forward-secrecy']));
      expect(r.protocols.find((p) => p.version === 'TLSv1.2')?.serverPreference).toBe(false);
      expect(r.rating.grade).toBe('B');
    });

    it('fail/expired: an expired certificate is F', async () => {
      const r = await scanned('expired');
      expect(r.certificate?.expired).toBe(true);
      expect(r.certificate?.isOrderCertificate).toBe(false);
      expect(r.findings.map((f) => f.id)).toContain('cert.expired');
      expect(r.rating.grade).toBe('F');
    });

    it('fail/wrong-name: a certificate for another name is F', async () => {
      const r = await scanned('wrong-name');
      expect(r.certificate).toMatchObject({ matchesName: false, trusted: true });
      expect(r.findings.find((f) => f.id === 'cert.name-mismatch')?.severity).toBe('critical');
      expect(r.rating.grade).toBe('F');
    });

    it('fail/incomplete: a leaf sent without its intermediate is flagged; the chain is completed from AIA', async () => {
      const r = await scanned('incomplete');
      expect(r.certificate).toMatchObject({ chainComplete: false, trusted: true });
      expect(r.certificate?.chainPem).toHaveLength(1);
      expect(r.findings.find((f) => f.id === 'cert.chain-incomplete')?.severity).toBe('medium');
      expect(r.rating.grade).toBe('B');
    });

    it('ok/tls13-only: the certificate and its stapled OCSP response come through node:tls', async () => {
      const r = await scanned('tls13-only');
      expect(r.protocols.filter((p) => p.offered).map((p) => p.version)).toEqual(['TLSv1.3']);
      expect(r.certificate).toMatchObject({
        trusted: true,
        chainComplete: true,
        isOrderCertificate: true,
        ocspStapled: true,
      });
      expect(r.handshake).toEqual({ secureRenegotiation: null, compression: null, fallbackScsv: null });
      expect(r.rating.grade).toBe('A');
    });
  });
});

describe('scanHost without a TLS server', () => {
  it('fail/a listener that accepts and never answers: could-not-scan within the timeout', async () => {
    const silent = await startSilentServer();
    try {
      for (const timeoutMs of [undefined, 1000]) {
        const started = performance.now();
        const report = await scanHost(
          { name: NAME },
          {
            lookup: async () => ['127.0.0.1'],
            allowPrivate: true,
            port: silent.port,
            httpPort: await freePort(),
            now: () => TEST_NOW,
            ...(timeoutMs === undefined ? {} : { timeoutMs }),
          },
        );
        const elapsed = performance.now() - started;
        console.log(`scan silent (timeout ${timeoutMs ?? 'default'}): ${Math.round(elapsed)} ms`);
        expect(report.status).toBe('could-not-scan');
        expect(elapsed).toBeLessThan((timeoutMs ?? 5000) + 1000);
      }
    } finally {
      await silent.close();
    }
  });

  it('fail/a name that resolves only to private addresses is refused without a connection', async () => {
    const listener = await startSilentServer();
    const report = await scanHost(
      { name: NAME },
      {
        lookup: async () => ['127.0.0.1', '10.1.2.3', 'fe80::1'],
        allowPrivate: false,
        port: listener.port,
        httpPort: listener.port,
        now: () => TEST_NOW,
      },
    );
    const connections = listener.connections();
    await listener.close();
    expect(report).toMatchObject({ status: 'could-not-scan', address: null });
    expect(report.status === 'could-not-scan' && report.problem).toMatch(/refused.*non-public/);
    expect(connections).toBe(0);
  });

  it('fail/nothing listening: could-not-scan at once', async () => {
    const port = await freePort();
    const report = await scanHost(
      { name: NAME },
      { lookup: async () => ['127.0.0.1'], allowPrivate: true, port, httpPort: port, now: () => TEST_NOW },
    );
    expect(report).toMatchObject({ status: 'could-not-scan', address: '127.0.0.1' });
    expect(report.status === 'could-not-scan' && report.problem).toMatch(/cannot connect/);
  });
});
