/**
 * RFC 5280 §5 v2 CRLs, encoded directly with der-writer. A CRL of the whole CA can hold hundreds
 * of thousands of entries, so the entry list is joined with one Buffer.concat rather than spread
 * into tlv() (argument spreading of that size can overflow the stack).
 */
import { readTlv } from '../core/der.js';
import { bits, explicit, implicitPrimitive, int, octets, oid, seq, time, tlv, uintBytes } from './der-writer.js';

export interface Signer {
  /** DER AlgorithmIdentifier of the signatures this signer makes (e.g. SEQUENCE{ecdsa-with-SHA256} or SEQUENCE{sha256WithRSAEncryption, NULL}). */
  readonly algorithm: Uint8Array;
  /** The raw signature value (ECDSA: DER Ecdsa-Sig-Value, as node:crypto.sign gives). */
  sign(data: Uint8Array): Uint8Array;
}

export interface CrlEntry {
  /** Unsigned big-endian magnitude. */
  readonly serial: Uint8Array;
  /** Unix seconds. */
  readonly revokedAt: number;
  /** RFC 5280 CRLReason code; null or 0 → no reasonCode extension. */
  readonly reason: number | null;
}

export interface CrlInput {
  /** The issuing CA's subject Name, DER, copied verbatim. */
  readonly issuer: Uint8Array;
  /** The issuing CA's subjectKeyIdentifier value. */
  readonly authorityKeyId: Uint8Array;
  /** cRLNumber. */
  readonly number: number | bigint;
  /** Unix seconds. */
  readonly thisUpdate: number;
  readonly nextUpdate: number;
  readonly entries: Iterable<CrlEntry>;
}

const V2 = int(1);
const AKI = oid('2.5.29.35');
const CRL_NUMBER = oid('2.5.29.20');
const REASON_CODE = oid('2.5.29.21');

/**
 * The CRLReason ENUMERATED for `reason`, or null when none should be encoded (null, 0 =
 * unspecified: RFC 5280 §5.3.1 says omit it). Throws RangeError for codes that must never appear
 * on a full CRL or in an OCSP revoked status: 7 is unassigned and 8 (removeFromCRL) belongs to
 * delta CRLs only.
 */
export function crlReason(reason: number | null): Uint8Array | null {
  if (reason === null || reason === 0) return null;
  if (!Number.isInteger(reason) || reason < 0 || reason > 10 || reason === 7 || reason === 8) {
    throw new RangeError(`invalid CRLReason ${reason}`);
  }
  return Uint8Array.of(0x0a, 0x01, reason);
}

// One DER encoding per reason: 100k entries share a handful of extension blocks.
const reasonExtensions = new Map<number, Uint8Array>();

function entryExtensions(reason: number | null): Uint8Array | null {
  const enumerated = crlReason(reason);
  if (enumerated === null) return null;
  let ext = reasonExtensions.get(reason!);
  if (ext === undefined) {
    ext = seq(seq(REASON_CODE, octets(enumerated)));
    reasonExtensions.set(reason!, ext);
  }
  return ext;
}

/** A DER CertificateList signed by `signer`. */
export function buildCrl(input: CrlInput, signer: Signer): Uint8Array {
  // A malformed issuer would silently produce an unverifiable CRL; check it is one whole TLV.
  if (input.issuer.length === 0 || input.issuer[0] !== 0x30 || readTlv(input.issuer, 0).end !== input.issuer.length) {
    throw new RangeError('issuer is not one DER Name');
  }
  if (input.nextUpdate < input.thisUpdate) throw new RangeError('nextUpdate before thisUpdate');
  const number = int(input.number);
  // RFC 5280 §5.2.3: cRLNumber at most 20 octets.
  if (number.length - 2 > 20) throw new RangeError('cRLNumber longer than 20 octets');

  const entries: Uint8Array[] = [];
  let entriesLength = 0;
  for (const e of input.entries) {
    const ext = entryExtensions(e.reason);
    const entry =
      ext === null ? seq(uintBytes(e.serial), time(e.revokedAt)) : seq(uintBytes(e.serial), time(e.revokedAt), ext);
    entries.push(entry);
    entriesLength += entry.length;
  }

  const extensions = explicit(
    0,
    seq(seq(AKI, octets(seq(implicitPrimitive(0, input.authorityKeyId)))), seq(CRL_NUMBER, octets(number))),
  );
  const tbsParts = [V2, signer.algorithm, input.issuer, time(input.thisUpdate), time(input.nextUpdate)];
  // RFC 5280 §5.1.2.6: absent, not an empty SEQUENCE, when nothing is revoked.
  if (entries.length > 0) tbsParts.push(tlv(0x30, Buffer.concat(entries, entriesLength)));
  tbsParts.push(extensions);
  const tbs = seq(...tbsParts);
  return seq(tbs, signer.algorithm, bits(signer.sign(tbs)));
}
