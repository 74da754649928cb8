// Signing one leaf of the built-in CA, step by step (after Boulder's `ca.IssuePrecertificate` and
// step-ca's `authority.Sign`): the template and its lint, the audit event before signing (group
// committed), the encoding and signature, then the certificate's record under its order's
// issuance claim with the audit event after (group committed, one transaction). What to sign with
// (profile, chain) is the BuiltinCa's choice; this file only signs and records.
import { GroupCommit, type Clock, type Transact, type TransactOptions } from '../core/index.js';
import type { AuditEvent, AuditRepo, CaRepo, NewLeaf } from '../storage/index.js';
import type { CaCert, Chain } from './chains.js';
import { pem } from './der-writer.js';
import { IssuanceClaimLost } from './issuance-claim.js';
import type { IssueRequest, IssuedCertificate } from './issuer.js';
import { fixedLeafExtensions, leafTemplate } from './leaf.js';
import { assertLintClean, type LeafTemplate } from './lint.js';
import { certsOnlyPkcs7 } from './pkcs7.js';
import type { Profile } from './profiles.js';
import { serialHex } from './serials.js';
import { name, signed, subjectAltName, subjectKeyIdentifier, tbsCertificate } from './x509.js';

export interface LeafSigningDeps {
  readonly audit: Pick<AuditRepo, 'appendMany'>;
  /** Runs `fn` in one transaction with repositories bound to it. */
  readonly transact: Transact<{ repo: CaRepo; audit: Pick<AuditRepo, 'appendMany'> }>;
  readonly clock: Clock;
  readonly privateMaxDays?: number;
  /** The CRL, CA certificate and OCSP links a leaf of this issuing CA carries. */
  readonly caLinks: (issuer: CaCert) => { crl: string; caIssuers: string; ocsp: string };
  /** Re-signs the CRL of an issuing key (a leaf recorded revoked must be on it at once). */
  readonly refreshCrl: (keyId: string) => Promise<unknown>;
}

/**
 * The record of signed leaves survives a lost answer to its COMMIT: kept by the database, the
 * leaves are issued (else the order's next round would sign another, the first left behind).
 */
const RECORDED: TransactOptions = { settleLostCommit: true };

/** Signs and records leaves; one per BuiltinCa. */
export class LeafSigner {
  private readonly before: GroupCommit<AuditEvent>;
  private readonly after: GroupCommit<{ leaf: NewLeaf; event: AuditEvent; claim?: string }>;

  constructor(private readonly o: LeafSigningDeps) {
    this.before = new GroupCommit((events) => o.audit.appendMany(events));
    this.after = new GroupCommit((items) =>
      o.transact(async (tx) => {
        // Leaves signed under an issuance claim are recorded as deliverable only while the claim is
        // held (the order rows stay locked until commit); one whose claim was lost is recorded revoked.
        const lost = await tx.repo.recordLeavesUnderClaims(items, items[0]!.leaf.created_at);
        await tx.audit.appendMany(
          items.map((i, k) =>
            lost[k] !== true
              ? i.event
              : {
                  ...i.event,
                  action: 'ca.sign.discarded',
                  details: { ...i.event.details, reason: 'issuance claim lost' },
                },
          ),
        );
        return lost.map((l, k) => (l ? new IssuanceClaimLost(items[k]!.leaf.order_id!) : undefined));
      }, RECORDED),
    );
  }

  /**
   * Signs a leaf for `req` with `profile` on `chain`: lifetime capped by the schedule in force,
   * lint, audit, sign, record, audit. Throws IssuanceClaimLost when the order's claim was lost
   * meanwhile (the leaf is then recorded revoked and its CRL re-signed).
   */
  async sign(req: IssueRequest, profile: Profile, chain: Chain): Promise<IssuedCertificate> {
    const key = req.csr.key;
    const now = this.o.clock.nowSeconds();
    const template = leafTemplate(profile, req, now, key, this.o.privateMaxDays);
    assertLintClean(template, {
      now,
      ...(this.o.privateMaxDays === undefined ? {} : { privateMaxDays: this.o.privateMaxDays }),
      maxNames: 250,
    });

    const serial = serialHex(template.serial);
    const issuerKey = chain.issuerCert.key;
    const actor = req.actor ?? 'system';
    const customerId = req.customerId ?? null;
    await this.before.add({
      at: now,
      customerId,
      actor,
      clientAddress: null,
      action: 'ca.sign.begin',
      subject: serial,
      details: {
        keyId: issuerKey.id,
        profile: profile.id,
        names: template.dnsNames.length > 0 ? template.dnsNames : template.emails,
        orderId: req.orderId ?? null,
      },
    });

    // The extensions that depend only on the issuing CA, the profile and the key type are encoded once.
    const extensions = [
      this.fixedExtensions(chain.issuerCert, template),
      subjectKeyIdentifier(key.keyId),
      subjectAltName(template.dnsNames, template.emails, template.subject.length === 0),
    ];
    const signer = issuerKey.signer();
    const tbs = tbsCertificate({
      serial: template.serial,
      signatureAlgorithm: signer.algorithm,
      issuer: chain.issuerCert.subject,
      notBefore: template.notBefore,
      notAfter: template.notAfter,
      subject: name(template.subject),
      spki: key.spki,
      extensions,
    });
    const der = signed(tbs, signer);
    const certificatePem = pem('CERTIFICATE', der);
    const chainIds = [...chain.intermediates, chain.root].map((c) => c.row.id);

    try {
      await this.after.add({
        ...(req.issuanceClaim === undefined ? {} : { claim: req.issuanceClaim }),
        leaf: {
          order_id: req.orderId ?? null,
          customer_id: customerId,
          issuer_id: chain.issuerCert.row.id,
          key_id: issuerKey.id,
          serial,
          pem: certificatePem,
          // The chain and the PKCS#7 bundle are the same for every leaf of a chain: rebuilt from chain_ids on
          // read (`fulfillment`), they are not written ~3 KB at a time (half the cost of recording a leaf).
          chain_pem: '',
          pkcs7_pem: '',
          not_before: template.notBefore,
          not_after: template.notAfter,
          created_at: now,
          chain_ids: chainIds.join(','),
          profile: profile.id,
        },
        event: {
          at: now,
          customerId,
          actor,
          clientAddress: null,
          action: 'ca.sign.done',
          subject: serial,
          details: { keyId: issuerKey.id, notAfter: template.notAfter },
        },
      });
    } catch (e) {
      // Recorded revoked: the issuer's CRL lists it at once, though it was never handed out.
      if (e instanceof IssuanceClaimLost) await this.o.refreshCrl(issuerKey.id);
      throw e;
    }
    // The PKCS#7 bundle is built when first read: most callers store the certificate and show it later.
    let pkcs7: string | undefined;
    const intermediates = chain.intermediates;
    return {
      serial,
      issuerId: issuerKey.id,
      certificate: certificatePem,
      intermediate: chain.intermediatePem,
      get pkcs7() {
        return (pkcs7 ??= pem('PKCS7', certsOnlyPkcs7([der, ...intermediates.map((c) => c.der)])));
      },
      notBefore: template.notBefore,
      notAfter: template.notAfter,
      der,
      chainIds,
    };
  }

  /** Waits for pending audit and certificate writes (shutdown). */
  async flush(): Promise<void> {
    await Promise.all([this.before.idle(), this.after.idle()]);
  }

  private readonly fixedCache = new Map<string, Uint8Array>();

  /** The extensions that depend only on the issuing CA, the profile and the key type, encoded once. */
  private fixedExtensions(issuerCert: CaCert, t: LeafTemplate): Uint8Array {
    const cacheKey = `${issuerCert.row.id}|${t.profile.id}|${t.key.type}`;
    let fixed = this.fixedCache.get(cacheKey);
    if (fixed === undefined) {
      fixed = fixedLeafExtensions(t, issuerCert.key.keyId, this.o.caLinks(issuerCert));
      this.fixedCache.set(cacheKey, fixed);
    }
    return fixed;
  }
}
