import {
  CertdeskError,
  type CacheBroadcast,
  type Clock,
  type ProductType,
  type ServiceUrls,
  type SignatureHashAlgorithm,
  type Transact,
} from '../core/index.js';
import { isUniqueViolation, type AuditRepo, type CaRepo, type Repositories } from '../storage/index.js';
import { describeCaCert, findCert, resolveChain, type CaCert, type CaCertificateInfo } from './chains.js';
import { revokeLeaf } from './revocation.js';
import { fromPem, pem } from './der-writer.js';
import {
  answerOcsp,
  crlDue,
  crlLags,
  ocspIssuerIndex,
  signCrl,
  type IssuingKeyLookup,
  type OcspMemory,
} from './status.js';
import { describeAlgorithm, type CaKey, type CaKeyAlgorithm, type KeyStore } from './keys.js';
import type { KeyPairSource } from './key-pairs.js';
import { makeKeys, missingKeys, newCaCertificate, planHierarchy, type PlanOptions } from './ca-init.js';
import { certsOnlyPkcs7 } from './pkcs7.js';
import { profileFor } from './profiles.js';
import { subjectOf } from './x509.js';
import { hierarchySpecs, type BrandHierarchy } from './hierarchy.js';
import { HierarchyWatch } from './hierarchy-watch.js';
import { LeafSigner } from './leaf-signing.js';
import {
  type ChainInfo,
  type IssueRequest,
  type IssuedCertificate,
  type IssuerWithCapabilities,
  type RevocationResult,
  type RevokeOptions,
} from './issuer.js';

/** What `init` is given: the plan's key sizes, a progress log, keys made ahead, how many keys are made at once. */
type InitOptions = PlanOptions & { log?: (line: string) => void; keyPairs?: KeyPairSource; parallel?: number };

export interface BuiltinCaOptions {
  readonly repo: CaRepo;
  readonly audit: Pick<AuditRepo, 'appendMany'>;
  readonly keys: KeyStore;
  readonly clock: Clock;
  /** Runs `fn` in one transaction with repositories bound to it (`repos`: all of them, for a revocation's record). */
  readonly transact: Transact<{ repo: CaRepo; audit: Pick<AuditRepo, 'appendMany'>; repos: Repositories }>;
  /** The CRL, OCSP and CA certificate links put into certificates. */
  readonly urls: Pick<ServiceUrls, 'crl' | 'caCertificate' | 'ocsp'>;
  readonly brands: readonly BrandHierarchy[];
  readonly privateMaxDays?: number;
  /** Signed OCSP responses kept in memory (cleared in every process by a revocation); none: every answer is read. */
  readonly ocspMemory?: OcspMemory;
}

/**
 * The built-in certificate authority (DESIGN §5.7): per brand an RSA and an ECC hierarchy with a
 * cross-signed ECC intermediate and, where the brand offers SHA2-256, a legacy root. It signs
 * leaves after linting them, records every certificate before handing it out, answers OCSP from
 * signed responses it caches, and keeps one CRL per issuing key.
 */
export class BuiltinCa implements IssuerWithCapabilities {
  /** Every certificate is recorded (under its issuance claim) before `issue` answers: CRL and OCSP read those records. */
  readonly recordsCertificates = true as const;
  private certs = new Map<string, CaCert>();
  /** distrustMarks() as last computed; the same Map until the CA certificates change (readers compare it). */
  private marks?: Map<string, { phase1: number | null; phase2: number | null }>;
  private keys = new Map<string, CaKey>();
  /** OCSP: the issuing key of a CertID. */
  private issuingKey: IssuingKeyLookup = () => undefined;
  /** Signs and records leaves (`leaf-signing.ts`). */
  private readonly signer: LeafSigner;
  /** Loads, hears of changes, rechecks (`hierarchy-watch.ts`). */
  private readonly watch: HierarchyWatch;

  constructor(private readonly o: BuiltinCaOptions) {
    this.signer = new LeafSigner({
      audit: o.audit,
      transact: o.transact,
      clock: o.clock,
      ...(o.privateMaxDays === undefined ? {} : { privateMaxDays: o.privateMaxDays }),
      caLinks: (c) => this.caLinks(c),
      refreshCrl: (keyId) => this.refreshCrl(keyId),
    });
    this.watch = new HierarchyWatch({
      loadNow: () => this.loadNow(),
      loaded: () => this.certs,
      stored: () => o.repo.caCertificateStates(),
    });
  }

  /** Opens the keys and CA certificates in the database (one load at a time). Throws KeyFileError on a wrong key file. */
  load(): Promise<void> {
    return this.watch.load();
  }

  private async loadNow(): Promise<void> {
    const keys = new Map((await this.o.keys.loadAll()).map((k) => [k.id, k]));
    const certs = new Map<string, CaCert>();
    for (const row of await this.o.repo.listCaCertificates()) {
      const key = keys.get(row.key_id);
      if (key === undefined) throw new Error(`CA certificate ${row.id} names a missing key ${row.key_id}`);
      const der = Buffer.from(row.der, 'base64');
      certs.set(row.id, { row, der, pem: pem('CERTIFICATE', der), subject: subjectOf(der), key });
    }
    this.keys = keys;
    this.certs = certs;
    this.marks = undefined;
    this.issuingKey = ocspIssuerIndex([...certs.values()].filter((c) => c.row.parent_id !== null));
  }

  /** Hears the other processes' changes of the hierarchy and tells them of this one's (`HierarchyWatch.connect`). */
  connect(broadcast: CacheBroadcast, recheckSeconds = 0, onError?: (err: Error) => void): void {
    this.watch.connect(broadcast, recheckSeconds, onError);
  }

  /** True when every brand has a certificate of every role of its hierarchy (trusted or not): the CA can issue on every chain. */
  isInitialized(): boolean {
    return this.o.brands.every((b) =>
      hierarchySpecs(b).every((spec) => findCert(this.certs, b.issuer, spec.role) !== undefined),
    );
  }

  /**
   * Creates whatever part of each brand's hierarchy is missing (`certdesk ca init`, first start)
   * and returns the ids of the certificates created. Idempotent, and it completes a hierarchy that
   * a crash left half made: stored keys are used, not made again.
   * - Step 1: plan the certificates to create (ca-init.ts).
   * - Step 2: make every missing key at once (RSA prime searches run in parallel off the event
   *   loop), each stored as soon as it exists; `keyPairs` may hand out keys made earlier.
   * - Step 3: sign and store the certificates, parents first.
   * Another process initializing the same database at the same moment is tolerated: a key or a
   * certificate it stored first under the same id is adopted instead of ours. Loads of the
   * hierarchy (another process's news, the recheck) wait while the steps run: none can put back a
   * hierarchy read before a key or certificate they stored. Throws on a storage failure (what was
   * stored stays, and the next call goes on from there).
   */
  async init(options: InitOptions = {}): Promise<string[]> {
    const created = await this.watch.between(() => this.create(options));
    if (created.length > 0) await this.watch.loadEverywhere();
    else await this.load();
    return created;
  }

  /** `init`'s steps, between loads of the hierarchy. */
  private async create(options: InitOptions): Promise<string[]> {
    const created: string[] = [];
    const now = this.o.clock.nowSeconds();
    // Step 1: the plan.
    const plan = planHierarchy(
      this.o.brands,
      [...this.certs.values()],
      (issuer, role) => findCert(this.certs, issuer, role),
      options,
    );
    // Step 2: the keys.
    const make = (id: string, algorithm: CaKeyAlgorithm) => {
      const ahead = options.keyPairs?.(id, algorithm);
      options.log?.(
        `${ahead === undefined ? 'generating' : 'storing the made-ahead'} ${describeAlgorithm(algorithm)} key ${id}`,
      );
      return this.o.keys.generate(id, algorithm, now, ahead);
    };
    const wanted = missingKeys(plan, (id) => this.keys.has(id));
    for (const key of await makeKeys(wanted, make, options.parallel)) this.keys.set(key.id, key);
    // Step 3: the certificates.
    for (const { brand, spec, id, generation, keyId } of plan) {
      const key = this.keys.get(keyId);
      if (key === undefined) throw new Error(`${id}: its key ${keyId} is missing`);
      const parent = spec.parentRole === null ? undefined : findCert(this.certs, brand.issuer, spec.parentRole);
      if (spec.parentRole !== null && parent === undefined)
        throw new Error(`${id}: its parent ${spec.parentRole} is missing`);
      const { row, der, subject } = newCaCertificate(
        { brand, spec, id, generation, keyId },
        key,
        parent === undefined ? undefined : { ...parent, links: this.caLinks(parent) },
        now,
      );
      try {
        await this.o.repo.insertCaCertificate(row);
      } catch (e) {
        // Another process created this certificate first (for the same key): go on with theirs.
        if (!isUniqueViolation(e)) throw e;
        await this.loadNow();
        if (!this.certs.has(id)) throw e;
        continue;
      }
      await this.o.audit.appendMany([
        {
          at: now,
          customerId: null,
          actor: 'operator',
          clientAddress: null,
          action: 'ca.created',
          subject: id,
          details: { keyId, parent: row.parent_id, serial: row.serial },
        },
      ]);
      this.certs.set(id, { row, der, pem: pem('CERTIFICATE', der), subject, key });
      this.marks = undefined;
      options.log?.(`created ${id}`);
      created.push(id);
    }
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
      serial: row.serial,
      issuerId: row.keyId,
      certificate: row.pem,
      der,
      chainIds,
      intermediate: row.chainPem !== '' ? row.chainPem : intermediates.map((c) => c.pem).join(''),
      pkcs7:
        row.pkcs7Pem !== '' ? row.pkcs7Pem : pem('PKCS7', certsOnlyPkcs7([der, ...intermediates.map((c) => c.der)])),
      notBefore: row.notBefore,
      notAfter: row.notAfter,
    };
  }

  /** Every CA certificate, for `ca list` and `/pki/`. */
  list(): CaCertificateInfo[] {
    return [...this.certs.values()].map(describeCaCert);
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
    const c = resolveChain(this.o.brands, this.certs, brandId, sha, type);
    return {
      issuerId: c.issuerCert.key.id,
      intermediates: c.intermediates.map((i) => i.pem),
      root: c.root.pem,
      chainIds: [...c.intermediates, c.root].map((i) => i.row.id),
    };
  }

  private caLinks(c: CaCert): { crl: string; caIssuers: string; ocsp: string } {
    return { crl: this.o.urls.crl(c.key.id), caIssuers: this.o.urls.caCertificate(c.row.id), ocsp: this.o.urls.ocsp() };
  }

  /**
   * Signs a leaf: chain by product and SignatureHashAlgorithm, subject and extensions from the
   * profile, lifetime capped by the schedule in force, lint, audit, sign, record, audit.
   */
  async issue(req: IssueRequest): Promise<IssuedCertificate> {
    const profile = profileFor(req.product.type, req.product.validationLevel);
    if (profile === undefined)
      throw new CertdeskError('invalidInput', `product ${req.product.code} does not issue certificates`);
    const sha = req.signatureHashAlgorithm ?? 'SHA256-FULL-CHAIN';
    const chain = resolveChain(this.o.brands, this.certs, req.product.brand, sha, req.product.type);
    const key = req.csr.key;
    if ((sha === 'SHA256-ECC-HYBRID' || sha === 'SHA256-ECC-FULL') && key.type !== 'ecdsa') {
      throw new CertdeskError(
        'invalidInput',
        `${sha} is for ECC keys: the CSR holds an RSA key (use SHA256-FULL-CHAIN)`,
        { field: 'SignatureHashAlgorithm' },
      );
    }
    return this.signer.sign(req, profile, chain);
  }

  /**
   * Revokes a leaf by serial (`revokeLeaf`): records time and reason once, re-signs its issuer's
   * CRL and drops its cached OCSP answers; a reason may be raised to keyCompromise only.
   */
  revoke(serial: string, reasonName: string, options: RevokeOptions = {}): Promise<RevocationResult> {
    return revokeLeaf(
      {
        ...this.o,
        refreshCrl: (keyId) => this.refreshCrl(keyId),
        forgetOcsp: async () => this.o.ocspMemory?.clear(),
      },
      serial,
      reasonName,
      options,
    );
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

  /**
   * Regenerates every CRL that is older than half its validity or lags the revocations of its key
   * (`crlLags`; the periodic job).
   */
  async refreshDueCrls(): Promise<string[]> {
    const now = this.o.clock.nowSeconds();
    const refreshed: string[] = [];
    for (const keyId of this.crlIssuers()) {
      const current = await this.o.repo.crl(keyId);
      if (crlLags(current, await this.o.repo.revokedOf(keyId, now), now)) {
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
    return answerOcsp(
      {
        repo: this.o.repo,
        clock: this.o.clock,
        ...(this.o.ocspMemory === undefined ? {} : { memory: this.o.ocspMemory }),
      },
      request,
      this.issuingKey,
    );
  }

  /** Marks a CA certificate distrusted (issue 5 moves affected orders). */
  async distrust(id: string, phase1: number | null, phase2: number | null): Promise<void> {
    if (!(await this.o.repo.setDistrust(id, phase1, phase2)))
      throw new CertdeskError('notFound', `no CA certificate ${id}`);
    await this.o.audit.appendMany([
      {
        at: this.o.clock.nowSeconds(),
        customerId: null,
        actor: 'operator',
        clientAddress: null,
        action: 'ca.distrust',
        subject: id,
        details: { phase1, phase2 },
      },
    ]);
    await this.watch.loadEverywhere();
  }

  /** CA certificate ids marked distrusted, with their phase dates: one Map until they change. Do not modify it. */
  distrustMarks(): Map<string, { phase1: number | null; phase2: number | null }> {
    if (this.marks !== undefined) return this.marks;
    const marks = new Map<string, { phase1: number | null; phase2: number | null }>();
    for (const c of this.certs.values())
      if (c.row.distrust_phase1 !== null || c.row.distrust_phase2 !== null)
        marks.set(c.row.id, { phase1: c.row.distrust_phase1, phase2: c.row.distrust_phase2 });
    this.marks = marks;
    return marks;
  }

  /** Stops comparing with the stored hierarchy, and waits for pending audit and certificate writes (shutdown). */
  async flush(): Promise<void> {
    this.watch.stop();
    await this.signer.flush();
  }
}
