// The built-in CA's own numbers, measured in this process on one core after the HTTP servers have
// stopped: leaf issuances per second next to the raw signature rate of the same CA key (measured
// in the same rounds), and the time to re-sign a CRL of 100,000 revoked certificates. Issuance is
// `BuiltinCa.issue()` whole: chain choice, template, lint, the audit event before, encoding,
// signature, PKCS#7, and the certificate record and audit event after (both in SQLite, group
// committed). CSR checking happens when an order is placed and is reported on its own line.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadConfig } from '../src/config/index.js';
import { checkCsr, type CheckedCsr, type IssueRequest } from '../src/ca/index.js';
import { createServices, type Services } from '../src/main.js';
import { median, round } from './stats.js';

export interface CaBenchResult {
  readonly issuance: Record<
    'ecdsa' | 'rsa',
    {
      caKey: string;
      issuedPerSec: number;
      rawSignPerSec: number;
      /** The median of the rounds' ratios: each round measures both rates back to back. */
      ratio: number;
      /** Each round's issuance rate over its raw signature rate. */
      roundRatios: number[];
      /** The median issuance rate over the median raw rate, for comparison with earlier runs. */
      ratioOfMedians: number;
      runs: number[];
      rawRuns: number[];
      goal: string;
      met: boolean;
    }
  >;
  readonly checkCsrPerSec: number;
  readonly crl100k: { medianMs: number; runsMs: number[]; bytes: number; goal: string; met: boolean };
}

function opensslCsr(keyArgs: string[], names: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'certdesk-cabench-csr-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-new',
        ...keyArgs,
        '-nodes',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'csr.pem'),
        '-subj',
        `/CN=${names[0]!}`,
        '-addext',
        `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}`,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    return readFileSync(join(dir, 'csr.pem'), 'utf8');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs `fn` as often as it can for `seconds`, keeping `inFlight` calls going; returns calls per second. */
async function rate(seconds: number, inFlight: number, fn: () => Promise<unknown>): Promise<number> {
  const end = performance.now() + seconds * 1000;
  let done = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < end) {
        await fn();
        done++;
      }
    }),
  );
  return done / ((performance.now() - start) / 1000);
}

function syncRate(seconds: number, fn: () => void): number {
  const start = performance.now();
  const end = start + seconds * 1000;
  let done = 0;
  while (performance.now() < end) {
    for (let i = 0; i < 50; i++) fn();
    done += 50;
  }
  return done / ((performance.now() - start) / 1000);
}

export async function runCaBench(
  log: (line: string) => void,
  o: { runs: number; seconds: number },
): Promise<CaBenchResult> {
  const dataDir = mkdtempSync(join(tmpdir(), 'certdesk-cabench-'));
  let services: Services | undefined;
  try {
    services = await createServices(loadConfig({ CERTDESK_DATA_DIR: dataDir }));
    const s = services;
    log('CA: creating the hierarchy (RSA-2048 roots and intermediates)…');
    await s.ca.init({ rsaRootBits: 2048, rsaIntermediateBits: 2048 });
    const names = ['www.certdesk-bench.com', 'certdesk-bench.com'];
    const csr: CheckedCsr = checkCsr(opensslCsr(['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256'], names));
    const csrPem = opensslCsr(['-newkey', 'rsa:2048'], names);

    const kinds = {
      // Sectra's ECC-FULL chain: the leaf is signed by the ECDSA P-256 intermediate.
      ecdsa: {
        sha: 'SHA256-ECC-FULL',
        brand: 'Sectra',
        keyId: 'sectra-ecc-int-1',
        goal: '≥ 2,000/s and ≥ 30 % of raw',
        ok: (r: number, ratio: number) => r >= 2000 && ratio >= 0.3,
      },
      rsa: {
        sha: 'SHA256-FULL-CHAIN',
        brand: 'TrustPoint',
        keyId: 'trustpoint-rsa-int-1',
        goal: '≥ 75 % of raw',
        ok: (_r: number, ratio: number) => ratio >= 0.75,
      },
    } as const;
    const issuance = {} as CaBenchResult['issuance'];
    for (const [kind, k] of Object.entries(kinds) as [keyof typeof kinds, (typeof kinds)[keyof typeof kinds]][]) {
      const request: IssueRequest = {
        csr,
        product: { code: `${k.brand}.DV`, brand: k.brand, type: 'SSL', validationLevel: 'DV' },
        signatureHashAlgorithm: k.sha,
        dnsNames: names,
      };
      const signer = s.ca.signingKey(k.keyId)!.signer();
      const tbsSized = Buffer.alloc(700, 7);
      await rate(1, 64, () => s.ca.issue(request)); // warm-up
      const runs: number[] = [];
      const rawRuns: number[] = [];
      // Each round pairs the two rates, measured seconds apart: the machine's drift between rounds
      // (other work on the host, frequency) cancels in a round's ratio, not in a ratio of medians.
      const roundRatios: number[] = [];
      for (let i = 0; i < o.runs; i++) {
        rawRuns.push(syncRate(o.seconds, () => signer.sign(tbsSized)));
        runs.push(await rate(o.seconds, 64, () => s.ca.issue(request)));
        roundRatios.push(runs.at(-1)! / rawRuns.at(-1)!);
        log(
          `CA ${kind} run ${i + 1}/${o.runs}: issued ${Math.round(runs.at(-1)!)}/s, raw signatures ${Math.round(rawRuns.at(-1)!)}/s (${Math.round(100 * roundRatios.at(-1)!)} %)`,
        );
      }
      const issued = median(runs);
      const raw = median(rawRuns);
      const ratio = median(roundRatios);
      issuance[kind] = {
        caKey: kind === 'ecdsa' ? 'ECDSA P-256' : 'RSA-2048',
        issuedPerSec: Math.round(issued),
        rawSignPerSec: Math.round(raw),
        ratio: round(ratio, 3),
        roundRatios: roundRatios.map((r) => round(r, 3)),
        ratioOfMedians: round(issued / raw, 3),
        runs: runs.map(Math.round),
        rawRuns: rawRuns.map(Math.round),
        goal: k.goal,
        met: k.ok(issued, ratio),
      };
    }

    const checkCsrPerSec = Math.round(
      median(Array.from({ length: o.runs }, () => syncRate(Math.min(o.seconds, 1), () => checkCsr(csrPem)))),
    );

    // 100,000 revoked leaves of one issuing key, then the CRL re-signed (read, encode, sign, store).
    log('CA: recording 100,000 revoked certificates…');
    const keyId = 'trustpoint-rsa-int-1';
    const now = s.clock.nowSeconds();
    await s.db.kysely.transaction().execute(async (tx) => {
      for (let batch = 0; batch < 100; batch++) {
        await tx
          .insertInto('certificates')
          .values(
            Array.from({ length: 1000 }, (_, i) => ({
              order_id: null,
              customer_id: null,
              issuer_id: keyId,
              key_id: keyId,
              serial: `7F${(batch * 1000 + i).toString(16).toUpperCase().padStart(30, '0')}`,
              pem: '',
              chain_pem: '',
              pkcs7_pem: '',
              not_before: now,
              not_after: now + 86400 * 90,
              revoked_at: now,
              revocation_reason: (i % 5) + 1 === 2 ? 1 : (i % 5) + 1,
              created_at: now,
              chain_ids: null,
              profile: 'tls-dv',
            })),
          )
          .execute();
      }
    });
    const runsMs: number[] = [];
    let bytes = 0;
    for (let i = 0; i < o.runs; i++) {
      const t0 = performance.now();
      bytes = (await s.ca.refreshCrl(keyId)).length;
      runsMs.push(round(performance.now() - t0, 1));
      log(`CA CRL run ${i + 1}/${o.runs}: 100,000 entries in ${runsMs.at(-1)} ms (${bytes} bytes)`);
    }
    const crlMs = median(runsMs);
    return {
      issuance,
      checkCsrPerSec,
      crl100k: { medianMs: crlMs, runsMs, bytes, goal: '< 2,000 ms', met: crlMs < 2000 },
    };
  } finally {
    await services?.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export function formatCaTable(r: CaBenchResult): string {
  const rows = [
    ['CA measurement', 'median', 'raw signatures (same key)', 'ratio', 'goal', 'met'],
    ...(['ecdsa', 'rsa'] as const).map((k) => {
      const x = r.issuance[k];
      return [
        `issuance, ${x.caKey} CA key`,
        `${x.issuedPerSec}/s`,
        `${x.rawSignPerSec}/s`,
        `${Math.round(x.ratio * 100)} %`,
        x.goal,
        x.met ? 'yes' : 'NO',
      ];
    }),
    [
      'CRL of 100,000 entries (read, encode, sign, store)',
      `${r.crl100k.medianMs} ms`,
      '',
      '',
      r.crl100k.goal,
      r.crl100k.met ? 'yes' : 'NO',
    ],
    ['checkCsr (RSA-2048, at order time)', `${r.checkCsrPerSec}/s`, '', '', '', ''],
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  return rows.map((row) => row.map((c, i) => c.padEnd(widths[i]!)).join('  ')).join('\n');
}
