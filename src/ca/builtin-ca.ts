import { X509Certificate } from 'node:crypto';
import { CertdeskError, customerId as toCustomerId, type Clock, type ProductType, type SignatureHashAlgorithm } from '../core/index.js';
import type { AuditEvent, AuditRepo, CaCertificateRow, CaRepo, NewLeaf } from '../storage/index.js';
import { GroupCommit } from './group-commit.js';
import { fromPem, pem } from './der-writer.js';
import { answerOcsp, crlDue, ocspIssuerIndex, signCrl, type IssuingKeyLookup } from './status.js';
import { describeAlgorithm, type CaKey, type KeyStore } from './keys.js';
import { assertLintClean, type LeafTemplate } from './lint.js';
import { certsOnlyPkcs7 } from './pkcs7.js';
import { profileFor } from './profiles.js';
import { name, signed, subjectAltName, subjectKeyIdentifier, subjectOf, tbsCertificate } from './x509.js';
import { hierarchySpecs, signCaCertificate, type BrandHierarchy, type CaRole } from './hierarchy.js';
import { newSerial, serialHex } from './serials.js';
import { fixedLeafExtensions, leafTemplate } from './leaf.js';
import { REVOCATION_REASONS, type ChainInfo, type IssueRequest, type IssuedCertificate, type Issuer, type RevocationResult } from './issuer.js';

const DAY = 86_400;

export interface BuiltinCaOptions {
  readonly repo: CaRepo;
  readonly audit: Pick<AuditRepo, 'appendMany'>;
  readonly keys: KeyStore;
  readonly clock: Clock;
  /** Runs `fn` in one transaction with repositories bound to it. */
  readonly transact: <T>(fn: (tx: { repo: CaRepo; audit: Pick<AuditRepo, 'appendMany'> }) => Promise<T>) => Promise<T>;
  /** Base of CRL, OCSP and CA certificate links (CERTDESK_PUBLIC_URL). */
  readonly publicUrl: string;
  readonly brands: readonly BrandHierarchy[];
  readonly privateMaxDays?: number;
}

/** A CA certificate with what chain building needs, decoded once at load. */
interface CaCert {
  readonly row: CaCertificateRow;
  readonly der: Uint8Array;
  readonly pem: string;
  readonly subject: Uint8Array;
  readonly key: CaKey;
}

/** How a leaf is signed and delivered: the signing CA certificate, the chain above it. */
interface Chain {
  readonly issuerCert: CaCert;
  /** Intermediates delivered to the subscriber, leaf side first (no root). */
  readonly intermediates: readonly CaCert[];
  readonly root: CaCert;
  readonly intermediatePem: string;
}

/**
 * The built-in certificate authority (DESIGN §5.7): per brand an RSA and an ECC hierarchy with a
 * cross-signed ECC intermediate and, where the brand offers SHA2-256, a legacy root. It signs
 * leaves after linting them, records every certificate before handing it out, answers OCSP from
 * signed responses it caches, and keeps one CRL per issuing key.
 */
export class BuiltinCa implements Issuer {
  private certs = new Map<string, CaCert>();
  private keys = new Map<string, CaKey>();
  /** OCSP: the issuing key of a CertID. */
  private issuingKey: IssuingKeyLookup = () => undefined;
  private readonly before: GroupCommit<AuditEvent>;
  private readonly after: GroupCommit<{ leaf: NewLeaf; event: AuditEvent }>;

  constructor(private readonly o: BuiltinCaOptions) {
    this.before = new GroupCommit((events) => o.audit.appendMany(events));
    this.after = new GroupCommit((items) =>
      o.transact(async (tx) => {
        await tx.repo.insertLeaves(items.map((i) => i.leaf));
        await tx.audit.appendMany(items.map((i) => i.event));
      }),
    );
  }

  /** Opens the keys and CA certificates in the database. Throws KeyFileError on a wrong key file. */
  async load(): Promise<void> {
    const keys = await this.o.keys.loadAll();
    this.keys = new Map(keys.map((k) => [k.id, k]));
    const certs = new Map<string, CaCert>();
    for (const row of await this.o.repo.listCaCertificates()) {
      const key = this.keys.get(row.key_id);
      if (key === undefined) throw new Error(`CA certificate ${row.id} names a missing key ${row.key_id}`);
      const der = Buffer.from(row.der, 'base64');
      certs.set(row.id, { row, der, pem: pem('CERTIFICATE', der), subject: subjectOf(der), key });
    }
    this.certs = certs;
    this.issuingKey = ocspIssuerIndex([...certs.values()].filter((c) => c.row.parent_id !== null));
  }

  /** True when every brand has its hierarchy. */
  isInitialized(): boolean {
    return this.o.brands.every((b) => this.findCert(b.issuer, 'rsa-int') !== undefined);
  }

  /** Creates whatever part of each brand's hierarchy is missing (`certdesk ca init`). Idempotent. */
  async init(options: { rsaRootBits?: number; rsaIntermediateBits?: number; log?: (line: string) => void } = {}): Promise<string[]> {
    const created: string[] = [];
    const now = this.o.clock.nowSeconds();
    for (const brand of this.o.brands) {
      for (const spec of hierarchySpecs(brand, options)) {
        // A role needs a (new generation of its) certificate when it has none that is trusted.
        const existing = [...this.certs.values()].filter((c) => c.row.id.startsWith(`${brand.issuer}-`) && c.row.role === spec.role);
        if (existing.some((c) => c.row.distrust_phase1 === null)) continue;
        const generation = existing.reduce((max, c) => Math.max(max, c.row.generation), 0) + 1;
        const id = `${brand.issuer}-${spec.role}-${generation}`;
        // The cross-signed and legacy intermediates carry their twin's (current) key.
        const twin = spec.keyRole === spec.role ? undefined : this.findCert(brand.issuer, spec.keyRole);
        const keyId = twin?.key.id ?? `${brand.issuer}-${spec.keyRole}-${generation}`;
        let key = this.keys.get(keyId);
        if (key === undefined) {
          options.log?.(`generating ${describeAlgorithm(spec.algorithm)} key ${keyId}`);
          key = await this.o.keys.generate(keyId, spec.algorithm, now);
          this.keys.set(keyId, key);
        }
        const parent = spec.parentRole === null ? undefined : this.findCert(brand.issuer, spec.parentRole);
        if (spec.parentRole !== null && parent === undefined) throw new Error(`${id}: its parent ${spec.parentRole} is missing`);
        const subject = name(spec.subject);
        const serial = newSerial(now);
        const notBefore = now;
        const notAfter = Math.min(now + spec.years * 365 * DAY, parent?.row.not_after ?? Number.MAX_SAFE_INTEGER);
        const der = signCaCertificate(spec, {
          serial, subject, notBefore, notAfter, key,
          parent: parent === undefined ? undefined : { subject: parent.subject, key: parent.key, links: this.caLinks(parent) },
        });
        const row: CaCertificateRow = {
          id, brand: brand.id, role: spec.role, generation, key_id: keyId, parent_id: parent?.row.id ?? null, der: Buffer.from(der).toString('base64'),
          serial: serialHex(serial), not_before: notBefore, not_after: notAfter, distrust_phase1: null, distrust_phase2: null, created_at: now,
        };
        await this.o.repo.insertCaCertificate(row);
        await this.o.audit.appendMany([{ at: now, customerId: null, actor: 'operator', clientAddress: null, action: 'ca.created', subject: id, details: { keyId, parent: row.parent_id, serial: row.serial } }]);
        this.certs.set(id, { row, der, pem: pem('CERTIFICATE', der), subject, key });
        options.log?.(`created ${id}`);
        created.push(id);
      }
    }
    await this.load();
    return created;
  }

  /**
   * A leaf issued here, in the shapes of `issue()`: the chain and PKCS#7 rebuilt from the CA
   * certificates it was delivered with. Undefined for a serial this CA did not issue.
   */
  async fulfillment(serial: string): Promise<IssuedCertificate | undefined> {
    const row = await this.o.repo.leafRecord(serial);
    if (row === undefined || row.keyId === null) return undefined;
    const chainIds = row.chainIds === null ? [] : row.chainIds.split(',');
    const chainCerts = chainIds.map((id) => this.certs.get(id)).filter((c): c is CaCert => c !== undefined);
    const intermediates = chainCerts.slice(0, -1);
    const der = fromPem(row.pem, 'CERTIFICATE');
    return {
      serial: row.serial, issuerId: row.keyId, certificate: row.pem, der, chainIds,
      intermediate: row.chainPem !== '' ? row.chainPem : intermediates.map((c) => c.pem).join(''),
      pkcs7: row.pkcs7Pem !== '' ? row.pkcs7Pem : pem('PKCS7', certsOnlyPkcs7([der, ...intermediates.map((c) => c.der)])),
      notBefore: row.notBefore, notAfter: row.notAfter,
    };
  }

  /** Every CA certificate, for `ca list` and `/pki/`. */
  list(): { id: string; brand: string; role: string; keyId: string; keyType: string; bits: number; parent: string | null; subject: string; notBefore: number; notAfter: number; distrust: { phase1: number | null; phase2: number | null } | null; pem: string }[] {
    return [...this.certs.values()].map((c) => ({
      id: c.row.id, brand: c.row.brand, role: c.row.role, keyId: c.key.id, keyType: c.key.type, bits: c.key.bits, parent: c.row.parent_id,
      subject: new X509Certificate(c.der).subject.replace(/\n/g, ', '), notBefore: c.row.not_before, notAfter: c.row.not_after,
      distrust: c.row.distrust_phase1 === null && c.row.distrust_phase2 === null ? null : { phase1: c.row.distrust_phase1, phase2: c.row.distrust_phase2 },
      pem: c.pem,
    }));
  }

  /** An opened CA key (the benchmark compares issuance with the raw signature rate of the same key). */
  signingKey(keyId: string): CaKey | undefined {
    return this.keys.get(keyId);
  }

  caCertificate(id: string): Uint8Array | undefined {
    return this.certs.get(id)?.der;
  }

  /** The chain a product and SignatureHashAlgorithm get (DESIGN §5.7), or a clear error. */
  chain(brandId: string, sha: SignatureHashAlgorithm, type: ProductType = 'SSL'): ChainInfo {
    const c = this.resolveChain(brandId, sha, type);
    return { issuerId: c.issuerCert.key.id, intermediates: c.intermediates.map((i) => i.pem), root: c.root.pem, chainIds: [...c.intermediates, c.root].map((i) => i.row.id) };
  }

  private resolveChain(brandId: string, sha: SignatureHashAlgorithm, type: ProductType): Chain {
    const brand = this.o.brands.find((b) => b.id === brandId);
    if (brand === undefined) throw new CertdeskError('unknownProduct', `no CA hierarchy for brand ${brandId}`);
    if (!brand.signatureHashAlgorithms.includes(sha)) {
      throw new CertdeskError('invalidInput', `SignatureHashAlgorithm ${sha} is not offered by ${brand.name} (offered: ${brand.signatureHashAlgorithms.join(', ')})`, { field: 'SignatureHashAlgorithm' });
    }
    let roles: readonly CaRole[];
    if (type === 'CODESIGN' || type === 'SMIME') {
      if (sha !== 'SHA256-FULL-CHAIN') throw new CertdeskError('invalidInput', `${type} certificates are issued on the RSA chain only (SHA256-FULL-CHAIN)`, { field: 'SignatureHashAlgorithm' });
      roles = [type === 'CODESIGN' ? 'codesign-int' : 'smime-int', 'rsa-root'];
    } else {
      roles = {
        'SHA256-FULL-CHAIN': ['rsa-int', 'rsa-root'],
        'SHA256-ECC-HYBRID': ['ecc-int-x', 'rsa-root'],
        'SHA256-ECC-FULL': ['ecc-int', 'ecc-root'],
        'SHA2-256': ['rsa-int-legacy', 'legacy-root'],
      }[sha] as readonly CaRole[];
    }
    const certs = roles.map((r) => this.findCert(brand.issuer, r));
    if (certs.some((c) => c === undefined)) throw new CertdeskError('notReady', `the CA hierarchy of ${brand.name} is not initialized: run \`certdesk ca init\``);
    const chain = certs as CaCert[];
    const intermediates = chain.slice(0, -1);
    return { issuerCert: chain[0]!, intermediates, root: chain[chain.length - 1]!, intermediatePem: intermediates.map((c) => c.pem).join('') };
  }

  /** The newest trusted certificate of a role (a distrusted one only when there is no other). */
  private findCert(issuer: string, role: CaRole): CaCert | undefined {
    let best: CaCert | undefined;
    for (const c of this.certs.values()) {
      if (!c.row.id.startsWith(`${issuer}-`) || c.row.role !== role) continue;
      const distrusted = c.row.distrust_phase1 !== null;
      const bestDistrusted = best?.row.distrust_phase1 !== null && best !== undefined;
      if (best === undefined || (bestDistrusted && !distrusted) || (bestDistrusted === distrusted && c.row.generation > best.row.generation)) best = c;
    }
    return best;
  }

  private caLinks(c: CaCert): { crl: string; caIssuers: string; ocsp: string } {
    const base = this.o.publicUrl;
    return { crl: `${base}/crl/${c.key.id}.crl`, caIssuers: `${base}/pki/${c.row.id}.crt`, ocsp: `${base}/ocsp` };
  }

  /**
   * Signs a leaf: chain by product and SignatureHashAlgorithm, subject and extensions from the
   * profile, lifetime capped by the schedule in force, lint, audit, sign, record, audit.
   */
  async issue(req: IssueRequest): Promise<IssuedCertificate> {
    const profile = profileFor(req.product.type, req.product.validationLevel);
    if (profile === undefined) throw new CertdeskError('invalidInput', `product ${req.product.code} does not issue certificates`);
    const sha = req.signatureHashAlgorithm ?? 'SHA256-FULL-CHAIN';
    const chain = this.resolveChain(req.product.brand, sha, req.product.type);
    const key = req.csr.key;
    if ((sha === 'SHA256-ECC-HYBRID' || sha === 'SHA256-ECC-FULL') && key.type !== 'ecdsa') {
      throw new CertdeskError('invalidInput', `${sha} is for ECC keys: the CSR holds an RSA key (use SHA256-FULL-CHAIN)`, { field: 'SignatureHashAlgorithm' });
    }
    const now = this.o.clock.nowSeconds();
    const template = leafTemplate(profile, req, now, key, this.o.privateMaxDays);
    assertLintClean(template, { now, ...(this.o.privateMaxDays === undefined ? {} : { privateMaxDays: this.o.privateMaxDays }), maxNames: 250 });

    const serial = serialHex(template.serial);
    const issuerKey = chain.issuerCert.key;
    const actor = req.actor ?? 'system';
    const customerId = req.customerId ?? null;
    await this.before.add({
      at: now, customerId, actor, clientAddress: null, action: 'ca.sign.begin', subject: serial,
      details: { keyId: issuerKey.id, profile: profile.id, names: template.dnsNames.length > 0 ? template.dnsNames : template.emails, orderId: req.orderId ?? null },
    });

    // The extensions that depend only on the issuing CA, the profile and the key type are encoded once.
    const extensions = [
      this.fixedExtensions(chain.issuerCert, template),
      subjectKeyIdentifier(key.keyId),
      subjectAltName(template.dnsNames, template.emails, template.subject.length === 0),
    ];
    const signer = issuerKey.signer();
    const tbs = tbsCertificate({
      serial: template.serial, signatureAlgorithm: signer.algorithm, issuer: chain.issuerCert.subject, notBefore: template.notBefore, notAfter: template.notAfter,
      subject: name(template.subject), spki: key.spki, extensions,
    });
    const der = signed(tbs, signer);
    const certificatePem = pem('CERTIFICATE', der);
    const chainIds = [...chain.intermediates, chain.root].map((c) => c.row.id);

    await this.after.add({
      leaf: {
        order_id: req.orderId ?? null, customer_id: customerId, issuer_id: chain.issuerCert.row.id, key_id: issuerKey.id, serial, pem: certificatePem,
        // The chain and the PKCS#7 bundle are the same for every leaf of a chain: rebuilt from chain_ids on
        // read (`fulfillment`), they are not written ~3 KB at a time (half the cost of recording a leaf).
        chain_pem: '', pkcs7_pem: '', not_before: template.notBefore, not_after: template.notAfter, created_at: now,
        chain_ids: chainIds.join(','), profile: profile.id,
      },
      event: { at: now, customerId, actor, clientAddress: null, action: 'ca.sign.done', subject: serial, details: { keyId: issuerKey.id, notAfter: template.notAfter } },
    });
    // The PKCS#7 bundle is built when first read: most callers store the certificate and show it later.
    let pkcs7: string | undefined;
    const intermediates = chain.intermediates;
    return {
      serial, issuerId: issuerKey.id, certificate: certificatePem, intermediate: chain.intermediatePem,
      get pkcs7() {
        return (pkcs7 ??= pem('PKCS7', certsOnlyPkcs7([der, ...intermediates.map((c) => c.der)])));
      },
      notBefore: template.notBefore, notAfter: template.notAfter, der, chainIds,
    };
  }

  private readonly fixedCache = new Map<string, Uint8Array>();

  /** The extensions that depend only on the issuing CA, the profile and the key type, encoded once. */
  private fixedExtensions(issuerCert: CaCert, t: LeafTemplate): Uint8Array {
    const cacheKey = `${issuerCert.row.id}|${t.profile.id}|${t.key.type}`;
    let fixed = this.fixedCache.get(cacheKey);
    if (fixed === undefined) {
      fixed = fixedLeafExtensions(t, issuerCert.key.keyId, this.caLinks(issuerCert));
      this.fixedCache.set(cacheKey, fixed);
    }
    return fixed;
  }

  /**
   * Revokes a leaf by serial: records time and reason once, drops its cached OCSP responses and
   * regenerates its issuer's CRL, with an audit event before and after.
   */
  async revoke(serial: string, reasonName: string, options: { actor?: string; at?: number } = {}): Promise<RevocationResult> {
    const reason = REVOCATION_REASONS[reasonName as keyof typeof REVOCATION_REASONS];
    if (reason === undefined) throw new CertdeskError('invalidInput', `unknown revocation reason ${reasonName} (one of ${Object.keys(REVOCATION_REASONS).join(', ')})`, { field: 'RevokeReason' });
    const normalized = serial.replace(/^0x/i, '').replace(/:/g, '').toUpperCase();
    const leaf = await this.o.repo.leafBySerial(normalized);
    if (leaf === undefined || leaf.keyId === null) throw new CertdeskError('notFound', `no certificate with serial ${normalized} was issued here`);
    const at = options.at ?? this.o.clock.nowSeconds();
    const actor = options.actor ?? 'system';
    const owner = leaf.customerId === null ? null : toCustomerId(leaf.customerId);
    const event = (action: string, details: Record<string, unknown>): AuditEvent => ({ at, customerId: owner, actor, clientAddress: null, action, subject: normalized, details });
    await this.o.audit.appendMany([event('ca.revoke.begin', { reason: reasonName })]);
    const revoked = await this.o.transact(async (tx) => {
      const done = await tx.repo.revoke(leaf.id, at, reason === 0 ? null : reason);
      if (done) await tx.repo.dropOcspResponses(leaf.keyId!, normalized);
      return done;
    });
    if (!revoked) {
      const current = await this.o.repo.leafBySerial(normalized);
      return { serial: normalized, revokedAt: current?.revokedAt ?? at, reason: current?.reason ?? null, alreadyRevoked: true };
    }
    await this.refreshCrl(leaf.keyId);
    await this.o.audit.appendMany([event('ca.revoke.done', { reason: reasonName, keyId: leaf.keyId })]);
    return { serial: normalized, revokedAt: at, reason: reason === 0 ? null : reason, alreadyRevoked: false };
  }

  /** The issuing CA key ids that have (or may have) a CRL: every key that signs certificates. */
  crlIssuers(): string[] {
    return [...new Set(this.keyHomes().map((c) => c.key.id))];
  }

  /** The current CRL of an issuing key (DER), made when there is none or it is due. */
  async crl(keyId: string): Promise<Uint8Array | undefined> {
    if (!this.crlIssuers().includes(keyId)) return undefined;
    const now = this.o.clock.nowSeconds();
    const current = await this.o.repo.crl(keyId);
    if (current !== undefined && !crlDue(current, now)) return Buffer.from(current.der, 'base64');
    return this.refreshCrl(keyId);
  }

  /** Builds and stores a new CRL for a key (see status.ts). */
  async refreshCrl(keyId: string): Promise<Uint8Array> {
    const issuer = this.issuerCertOfKey(keyId);
    return signCrl({ repo: this.o.repo, clock: this.o.clock }, keyId, issuer.subject, issuer.key);
  }

  /** Regenerates every CRL that is older than half its validity (the periodic job). */
  async refreshDueCrls(): Promise<string[]> {
    const now = this.o.clock.nowSeconds();
    const refreshed: string[] = [];
    for (const keyId of this.crlIssuers()) {
      const current = await this.o.repo.crl(keyId);
      if (crlDue(current, now)) {
        await this.refreshCrl(keyId);
        refreshed.push(keyId);
      }
    }
    return refreshed;
  }

  /** Each key's own certificate: not the cross-signed or legacy twins, which share a key (and its CRL). */
  private keyHomes(): CaCert[] {
    return [...this.certs.values()].filter((c) => c.row.role !== 'ecc-int-x' && c.row.role !== 'rsa-int-legacy');
  }

  private issuerCertOfKey(keyId: string): CaCert {
    const c = this.keyHomes().find((x) => x.key.id === keyId);
    if (c === undefined) throw new CertdeskError('notFound', `no CA key ${keyId}`);
    return c;
  }

  /** Answers an OCSP request (DER) with a DER response (see status.ts). */
  ocsp(request: Uint8Array): Promise<Uint8Array> {
    return answerOcsp({ repo: this.o.repo, clock: this.o.clock }, request, this.issuingKey);
  }

  /** Marks a CA certificate distrusted (issue 5 moves affected orders). */
  async distrust(id: string, phase1: number | null, phase2: number | null): Promise<void> {
    if (!(await this.o.repo.setDistrust(id, phase1, phase2))) throw new CertdeskError('notFound', `no CA certificate ${id}`);
    await this.o.audit.appendMany([{ at: this.o.clock.nowSeconds(), customerId: null, actor: 'operator', clientAddress: null, action: 'ca.distrust', subject: id, details: { phase1, phase2 } }]);
    await this.load();
  }

  /** CA certificate ids marked distrusted, with their phase dates. */
  distrustMarks(): Map<string, { phase1: number | null; phase2: number | null }> {
    const marks = new Map<string, { phase1: number | null; phase2: number | null }>();
    for (const c of this.certs.values()) if (c.row.distrust_phase1 !== null || c.row.distrust_phase2 !== null) marks.set(c.row.id, { phase1: c.row.distrust_phase1, phase2: c.row.distrust_phase2 });
    return marks;
  }

  /** Waits for pending audit and certificate writes (shutdown). */
  async flush(): Promise<void> {
    await Promise.all([this.before.idle(), this.after.idle()]);
  }
}


