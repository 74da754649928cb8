import { createHash } from 'node:crypto';
import { SharedCache, type Clock } from '../core/index.js';
import type { CaRepo, RevokedEntry, StoredCrl } from '../storage/index.js';
import { buildCrl } from './crl.js';
import { subjectPublicKey, type CaKey } from './keys.js';
import { buildOcspResponse, ocspErrorResponse, parseOcspRequest, OcspMalformedError, type OcspStatus } from './ocsp.js';

const DAY = 86_400;
/** OCSP responses and CRLs are valid a week and refreshed after half of it (BR §4.9.7, §4.9.10). */
export const STATUS_VALIDITY = 7 * DAY;
const OCSP_REFRESH_AFTER = Math.floor(STATUS_VALIDITY / 2);

export interface StatusContext {
  readonly repo: Pick<CaRepo, 'revokedOf' | 'crl' | 'saveCrl' | 'ocspResponse' | 'saveOcspResponse' | 'leaf'>;
  readonly clock: Clock;
  /** Signed OCSP responses kept in this process in front of the stored ones (`ocspMemory`). */
  readonly memory?: OcspMemory;
}

/**
 * Signed OCSP responses held in memory, so that a relying party's repeated question costs no
 * query: by issuing key, serial and CertID hash algorithm. A revocation clears them in every
 * process (topic `ocsp`, see SharedCache), before the revoking request answers. Should that news
 * never arrive (the revoking process killed between its commit and the clear, the broadcast cut),
 * an answer is kept at most OCSP_MEMORY_SECONDS before the stored state is read again: the
 * revocation's transaction dropped the stored answers with it.
 */
export type OcspMemory = SharedCache<{
  readonly der: Uint8Array;
  readonly nextUpdate: number;
  /** Served from memory until then; afterwards read again. */
  readonly keptUntil: number;
}>;

/** The longest a process answers OCSP from memory without reading the stored state again. */
export const OCSP_MEMORY_SECONDS = 60;

export function ocspMemory(maxEntries = 10_000): OcspMemory {
  return new SharedCache('ocsp', maxEntries);
}

/** Whether a stored CRL must be re-signed: none yet, or past half its validity. */
export function crlDue(current: { nextUpdate: number } | undefined, now: number): boolean {
  return current === undefined || current.nextUpdate - now <= STATUS_VALIDITY / 2;
}

/** The issuing CA key of an OCSP CertID: hash algorithm OID, issuer name hash and issuer key hash, in hex. */
export type IssuingKeyLookup = (hashAlg: string, nameHash: string, keyHash: string) => CaKey | undefined;

/** Indexes the issuing CAs (subject and key) by their SHA-1 and SHA-256 CertID hashes. */
export function ocspIssuerIndex(issuers: readonly { subject: Uint8Array; key: CaKey }[]): IssuingKeyLookup {
  const index = new Map<string, CaKey>();
  for (const c of issuers) {
    for (const [alg, oid] of [
      ['sha1', '1.3.14.3.2.26'],
      ['sha256', '2.16.840.1.101.3.4.2.1'],
    ] as const) {
      const digest = (data: Uint8Array) => createHash(alg).update(data).digest('hex');
      index.set(`${oid}/${digest(c.subject)}/${digest(subjectPublicKey(c.key.spki))}`, c.key);
    }
  }
  return (hashAlg, nameHash, keyHash) => index.get(`${hashAlg}/${nameHash}/${keyHash}`);
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');

/**
 * Builds and stores a new CRL for an issuing key. Repeats when a revocation committed while it
 * was being built (another process), so the stored CRL never lags one that finished before it.
 */
export async function signCrl(
  ctx: StatusContext,
  keyId: string,
  issuerName: Uint8Array,
  key: CaKey,
): Promise<Uint8Array> {
  for (let attempt = 0; ; attempt++) {
    const now = ctx.clock.nowSeconds();
    const entries = await ctx.repo.revokedOf(keyId, now);
    const previous = await ctx.repo.crl(keyId);
    const number = Math.max((previous?.number ?? 0) + 1, 1);
    const der = buildCrl(
      {
        issuer: issuerName,
        authorityKeyId: key.keyId,
        number,
        thisUpdate: now,
        nextUpdate: now + STATUS_VALIDITY,
        entries: entries.map((e) => ({
          serial: Buffer.from(e.serial, 'hex'),
          revokedAt: e.revokedAt,
          reason: e.reason,
        })),
      },
      key.signer(),
    );
    const entriesDigest = crlEntriesDigest(entries);
    const saved = await ctx.repo.saveCrl(keyId, {
      number,
      thisUpdate: now,
      nextUpdate: now + STATUS_VALIDITY,
      der: Buffer.from(der).toString('base64'),
      entriesDigest,
    });
    // A revocation or a reason escalated to keyCompromise committed while this CRL was built would
    // be missing from it: compare what it lists (not just how many), and build again if it changed.
    const after = await ctx.repo.revokedOf(keyId, now);
    if ((saved && sameEntries(entries, after)) || attempt >= 4)
      return saved ? der : Buffer.from((await ctx.repo.crl(keyId))!.der, 'base64');
  }
}

/**
 * What a CRL lists, as one value: SHA-256 over its entries (serial, date, reason) in the order
 * `revokedOf` gives them (revocation date, then serial: the same entries, the same order). Stored
 * with each CRL, so a CRL that lags the revocations (`crlLags`) is found without reading it.
 */
export function crlEntriesDigest(entries: readonly RevokedEntry[]): string {
  return createHash('sha256')
    .update(entries.map((e) => `${e.serial}|${e.revokedAt}|${e.reason ?? ''}`).join('\n'))
    .digest('hex');
}

/** Whether two reads of `revokedOf` list the same entries (each in its fixed order). */
function sameEntries(a: readonly RevokedEntry[], b: readonly RevokedEntry[]): boolean {
  return (
    a.length === b.length &&
    a.every((e, i) => e.serial === b[i]!.serial && e.revokedAt === b[i]!.revokedAt && e.reason === b[i]!.reason)
  );
}

/**
 * Whether a stored CRL must be re-signed now: due (`crlDue`), or it does not list what it would
 * list now (`entries`: `revokedOf` its key). The second catches a revocation whose CRL was never
 * signed: the process died between the revocation's commit and the signing, or the signing failed.
 */
export function crlLags(
  current: Pick<StoredCrl, 'nextUpdate' | 'entriesDigest'> | undefined,
  entries: readonly RevokedEntry[],
  now: number,
): boolean {
  return crlDue(current, now) || current?.entriesDigest !== crlEntriesDigest(entries);
}

/** Whether a signed OCSP response is still served as it is (not yet half way through its validity). */
function ocspFresh(r: { readonly nextUpdate: number }, now: number): boolean {
  return r.nextUpdate - now > STATUS_VALIDITY - OCSP_REFRESH_AFTER;
}

/** A remembered answer that may still be served from memory (fresh, and not kept past its time). */
function servable(r: { readonly nextUpdate: number; readonly keptUntil: number }, now: number): boolean {
  return now < r.keptUntil && ocspFresh(r, now);
}

/**
 * Answers an OCSP request (DER) with a DER response: a cached signed response when one is fresh,
 * else a newly signed one that is then cached. `issuingKey` finds the issuing CA key of a CertID
 * (hash algorithm OID, issuer name hash, issuer key hash, in hex). Serials this CA did not issue,
 * and issuers it does not run, get `unauthorized`: never `good`.
 */
export async function answerOcsp(
  ctx: StatusContext,
  request: Uint8Array,
  issuingKey: IssuingKeyLookup,
): Promise<Uint8Array> {
  // The same request (a relying party asking again, without a nonce we would not echo anyway) is
  // answered from memory before it is even parsed: the answer depends on its CertID alone.
  const asked = ctx.memory === undefined ? undefined : `q:${Buffer.from(request).toString('latin1')}`;
  const again = asked === undefined ? undefined : ctx.memory!.get(asked);
  if (again !== undefined && servable(again, ctx.clock.nowSeconds())) return again.der;
  let parsed;
  try {
    parsed = parseOcspRequest(request);
  } catch (e) {
    if (e instanceof OcspMalformedError) return ocspErrorResponse('malformedRequest');
    throw e;
  }
  if (parsed.certIds.length !== 1) return ocspErrorResponse('malformedRequest');
  const certId = parsed.certIds[0]!;
  const key = issuingKey(certId.hashAlgorithm, hex(certId.issuerNameHash), hex(certId.issuerKeyHash));
  if (key === undefined) return ocspErrorResponse('unauthorized');
  const serial = hex(certId.serial).toUpperCase();
  const now = ctx.clock.nowSeconds();
  const memoKey = `${key.id}/${serial}/${certId.hashAlgorithm}`;
  const remember = (entry: { der: Uint8Array; nextUpdate: number; keptUntil?: number }, epoch: number | undefined) => {
    const kept = { ...entry, keptUntil: entry.keptUntil ?? now + OCSP_MEMORY_SECONDS };
    ctx.memory?.set(memoKey, kept, epoch);
    if (asked !== undefined) ctx.memory?.set(asked, kept, epoch);
  };
  const remembered = ctx.memory?.get(memoKey);
  if (remembered !== undefined && servable(remembered, now)) {
    remember(remembered, ctx.memory?.epoch);
    return remembered.der;
  }
  // Read before the stored answer: one read before a revocation's clear is not remembered after it.
  const epoch = ctx.memory?.epoch;
  const cached = await ctx.repo.ocspResponse(key.id, serial, certId.hashAlgorithm);
  if (cached !== undefined && ocspFresh(cached, now)) {
    const der = Buffer.from(cached.der, 'base64');
    remember({ der, nextUpdate: cached.nextUpdate }, epoch);
    return der;
  }
  const leaf = await ctx.repo.leaf(key.id, serial);
  if (leaf === undefined) return ocspErrorResponse('unauthorized');
  const status: OcspStatus =
    leaf.revokedAt === null ? { kind: 'good' } : { kind: 'revoked', at: leaf.revokedAt, reason: leaf.reason };
  const der = buildOcspResponse(
    {
      responderKeyHash: key.keyId,
      producedAt: now,
      responses: [{ certId: certId.der, status, thisUpdate: now, nextUpdate: now + STATUS_VALIDITY }],
    },
    key.signer(),
  );
  await ctx.repo.saveOcspResponse(
    key.id,
    serial,
    certId.hashAlgorithm,
    Buffer.from(der).toString('base64'),
    now + STATUS_VALIDITY,
    { revokedAt: leaf.revokedAt, reason: leaf.reason },
  );
  remember({ der, nextUpdate: now + STATUS_VALIDITY }, epoch);
  return der;
}
