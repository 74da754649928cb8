// Operator commands of the built-in CA (DESIGN §4, §5.7).
import { readFileSync, writeFileSync } from 'node:fs';
import type { Command } from 'commander';
import { iso, lines, print } from './print.js';
import { CertdeskError, SIGNATURE_HASH_ALGORITHMS, type SignatureHashAlgorithm } from '../core/index.js';
// The CA's modules load when a command runs (cli/main.ts): issuer.js holds only the reason table.
import type { BuiltinCa } from '../ca/index.js';
import { REVOCATION_REASONS, revocationReasonName } from '../ca/issuer.js';
import type { CatalogService } from '../ra/catalog/catalog.js';

export type OpenCa = () => Promise<{
  ca: BuiltinCa;
  catalog: CatalogService;
  keyBits: { rsaRootBits: number; rsaIntermediateBits: number };
  close(): Promise<void>;
}>;

/** A date for distrust phases: YYYY-MM-DD or a full ISO timestamp. */
function parseDate(text: string, what: string): number {
  const ms = Date.parse(/^\d{4}-\d{2}-\d{2}$/.test(text) ? `${text}T00:00:00Z` : text);
  if (Number.isNaN(ms)) throw new Error(`${what}: not a date (YYYY-MM-DD): ${text}`);
  return Math.floor(ms / 1000);
}

/**
 * `ca init`, `ca list`, `ca sign`, `ca revoke`, `ca crl` and `ca distrust`. Each opens the
 * services for one run and closes them after; errors are thrown for the CLI runner to print.
 * Opening the CA never makes keys: `ca init` makes the missing ones, and `ca distrust` the key of
 * the replacement it creates; `ca sign` on a CA without a hierarchy is refused (run `ca init`).
 */
export function addCaCommands(program: Command, open: OpenCa): void {
  const ca = program.command('ca').description('the built-in certificate authority');
  const withCa = async <T>(
    fn: (c: {
      ca: BuiltinCa;
      catalog: CatalogService;
      keyBits: { rsaRootBits: number; rsaIntermediateBits: number };
    }) => Promise<T>,
  ): Promise<T> => {
    const opened = await open();
    try {
      return await fn(opened);
    } finally {
      await opened.close();
    }
  };

  ca.command('init')
    .description('create every missing CA key and certificate of each brand (also done on first start)')
    .option('--json', 'print one JSON object')
    .action(async (o: { json?: boolean }) => {
      const created = await withCa(({ ca: c, keyBits }) =>
        c.init({ ...keyBits, log: (line) => process.stderr.write(`${line}\n`) }),
      );
      print(
        o.json === true,
        { Created: created },
        created.length === 0 ? 'the CA hierarchy is complete: nothing to create' : `created: ${created.join(', ')}`,
      );
    });

  ca.command('list')
    .description('list CA certificates: issuer ids, key types, expiry and distrust marks')
    .option('--json', 'print one JSON object')
    .action(async (o: { json?: boolean }) => {
      const list = await withCa(async ({ ca: c }) => c.list());
      const rows = list.map((x) => ({
        ID: x.id,
        Brand: x.brand,
        Role: x.role,
        KeyID: x.keyId,
        KeyType: x.keyType === 'rsa' ? `RSA-${x.bits}` : `ECDSA P-${x.bits}`,
        Parent: x.parent,
        Subject: x.subject,
        NotBefore: iso(x.notBefore),
        NotAfter: iso(x.notAfter),
        Distrust:
          x.distrust === null
            ? null
            : {
                Phase1: x.distrust.phase1 === null ? null : iso(x.distrust.phase1),
                Phase2: x.distrust.phase2 === null ? null : iso(x.distrust.phase2),
              },
      }));
      const text = rows
        .map(
          (r) =>
            `${r.ID}\t${r.KeyType}\tuntil ${r.NotAfter}${r.Distrust === null ? '' : `\tDISTRUSTED from ${r.Distrust.Phase1 ?? '?'}`}`,
        )
        .join('\n');
      print(
        o.json === true,
        { CACertificates: rows },
        text === '' ? 'no CA certificates: run `certdesk ca init`' : text,
      );
    });

  ca.command('sign')
    .description("sign a CSR with a product's profile (private PKI use; orders do this themselves)")
    .requiredOption('--csr <file>', 'PEM or DER certificate signing request')
    .requiredOption('--product <code>', 'product code, e.g. TrustPoint.DV')
    .option('--signature-hash-algorithm <alg>', `chain: ${SIGNATURE_HASH_ALGORITHMS.join(', ')}`, 'SHA256-FULL-CHAIN')
    .option('--names <list>', "comma-separated DNS names (default: the CSR's)")
    .option('--email <list>', 'comma-separated mailbox addresses (S/MIME)')
    .option(
      '--organization <json>',
      'vetted organization for OV/EV/code signing as JSON, e.g. {"organization":"Acme","country":"DE"}',
    )
    .option('--json', 'print one JSON object')
    .action(
      async (o: {
        csr: string;
        product: string;
        signatureHashAlgorithm: string;
        names?: string;
        email?: string;
        organization?: string;
        json?: boolean;
      }) => {
        if (!(SIGNATURE_HASH_ALGORITHMS as readonly string[]).includes(o.signatureHashAlgorithm))
          throw new Error(`unknown --signature-hash-algorithm ${o.signatureHashAlgorithm}`);
        const raw = readFileSync(o.csr);
        const { checkCsr } = await import('../ca/checks.js');
        const csr = checkCsr(raw.includes('-----BEGIN') ? raw.toString('latin1') : raw);
        let organization: Record<string, string> | undefined;
        if (o.organization !== undefined) {
          try {
            organization = JSON.parse(o.organization) as Record<string, string>;
          } catch {
            throw new CertdeskError('invalidInput', '--organization is not JSON');
          }
        }
        const issued = await withCa(async ({ ca: c, catalog }) => {
          const product = catalog.product(o.product);
          const names =
            o.names === undefined
              ? csr.dnsNames.length > 0
                ? [...csr.dnsNames]
                : csr.commonName === ''
                  ? []
                  : [csr.commonName.toLowerCase()]
              : o.names
                  .split(',')
                  .map((n) => n.trim())
                  .filter(Boolean);
          return c.issue({
            csr,
            product: {
              code: product.code,
              brand: product.brand,
              type: product.type,
              validationLevel: product.validationLevel,
            },
            signatureHashAlgorithm: o.signatureHashAlgorithm as SignatureHashAlgorithm,
            dnsNames: product.type === 'SSL' ? names : [],
            ...(o.email === undefined ? {} : { emails: o.email.split(',').map((e) => e.trim()) }),
            ...(organization === undefined ? {} : { organization: organization as never }),
            actor: 'operator',
          });
        });
        const out = {
          Certificate: issued.certificate,
          Intermediate: issued.intermediate,
          Certificate_PKCS7: issued.pkcs7,
          StartDate: iso(issued.notBefore),
          EndDate: iso(issued.notAfter),
          Serial: issued.serial,
          IssuerID: issued.issuerId,
        };
        print(
          o.json === true,
          out,
          `${issued.certificate}${issued.intermediate}Serial: ${issued.serial}\nValid: ${out.StartDate} to ${out.EndDate}`,
        );
      },
    );

  ca.command('revoke')
    .description(
      "revoke a certificate by serial, or change a revoked one's reason to keyCompromise; its CRL is re-signed and OCSP answers at once",
    )
    .requiredOption('--serial <hex>', 'serial number in hex (as openssl x509 -serial prints it)')
    .option('--reason <reason>', `one of ${Object.keys(REVOCATION_REASONS).join(', ')}`, 'unspecified')
    .option('--json', 'print one JSON object')
    .action(async (o: { serial: string; reason: string; json?: boolean }) => {
      if (!/^(0x)?[0-9a-f:]{2,60}$/i.test(o.serial)) throw new Error(`--serial: not a hex serial number: ${o.serial}`);
      const r = await withCa(({ ca: c }) => c.revoke(o.serial, o.reason, { actor: 'operator' }));
      // The same rule as DELETE /Revoke: a repeat that does not raise the reason is refused.
      if (r.change === 'none') {
        throw new CertdeskError(
          'invalidOrderState',
          `certificate ${r.serial} is already revoked (${revocationReasonName(r.reason)}, since ${iso(r.revokedAt)}); only a change to keyCompromise is possible, so nothing was changed`,
        );
      }
      const out = {
        Serial: r.serial,
        RevokedAt: iso(r.revokedAt),
        Reason: revocationReasonName(r.reason),
        AlreadyRevoked: r.alreadyRevoked,
        ...(r.change === 'escalated' ? { PreviousReason: revocationReasonName(r.previousReason ?? null) } : {}),
      };
      print(o.json === true, out, lines(out));
      if (r.crlFailure !== undefined)
        process.stderr.write(
          `certdesk: warning: revoked, but the CRL could not be re-signed (${r.crlFailure}); the job ca.refresh-crls re-signs it within the hour, or run: certdesk ca crl --issuer <key id>\n`,
        );
    });

  ca.command('crl')
    .description('re-sign and print (or write) the CRL of an issuing CA')
    .requiredOption('--issuer <id>', "issuing CA key id, as in the certificates' CRL URL (see ca list: KeyID)")
    .option('--out <file>', 'write the DER CRL to this file instead of printing PEM')
    .action(async (o: { issuer: string; out?: string }) => {
      const der = await withCa(async ({ ca: c }) => {
        if (!c.crlIssuers().includes(o.issuer))
          throw new CertdeskError('notFound', `no issuing CA ${o.issuer} (one of: ${c.crlIssuers().join(', ')})`);
        return c.refreshCrl(o.issuer);
      });
      if (o.out !== undefined) writeFileSync(o.out, der);
      else
        process.stdout.write(
          `-----BEGIN X509 CRL-----\n${Buffer.from(der).toString('base64').replace(/.{64}/g, '$&\n').replace(/\n?$/, '\n')}-----END X509 CRL-----\n`,
        );
    });

  ca.command('distrust')
    .description(
      'mark a CA certificate distrusted from phase 1 (no new issuance) and phase 2 (existing ones distrusted)',
    )
    .requiredOption('--issuer <id>', 'CA certificate id (ca list: ID)')
    .requiredOption('--phase1 <date>', 'YYYY-MM-DD')
    .requiredOption('--phase2 <date>', 'YYYY-MM-DD')
    .option('--json', 'print one JSON object')
    .action(async (o: { issuer: string; phase1: string; phase2: string; json?: boolean }) => {
      const p1 = parseDate(o.phase1, '--phase1');
      const p2 = parseDate(o.phase2, '--phase2');
      if (p2 < p1) throw new Error('--phase2 lies before --phase1');
      // A distrusted issuer gets its replacement at once, so reissues have a trusted issuer to move to.
      const created = await withCa(async ({ ca: c, keyBits }) => {
        await c.distrust(o.issuer, p1, p2);
        return c.init({ ...keyBits, log: (line) => process.stderr.write(`${line}\n`) });
      });
      const out = { ID: o.issuer, Phase1: iso(p1), Phase2: iso(p2), Replacement: created };
      print(o.json === true, out, lines(out));
    });
}
