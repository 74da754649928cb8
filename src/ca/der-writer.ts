/**
 * A minimal DER encoder (X.690 §10) for what the CA signs: certificates, CRLs, OCSP responses and
 * PKCS#7 bundles. Every function returns the finished TLV bytes; constructed values take their
 * already-encoded children. There is no object model to walk and nothing to re-encode, which is
 * what makes issuance cost about as much as its signature (see docs/architecture.md: the
 * high-level X.509 libraries spend ~7 ms encoding one certificate, this spends ~10 µs).
 */

export type Der = Uint8Array;

/** The size of a TLV's header (tag and definite length, short or long form) for `length` content bytes. */
const headerLength = (length: number): number =>
  length < 0x80 ? 2 : length < 0x100 ? 3 : length < 0x10000 ? 4 : length < 0x1000000 ? 5 : 6;

/**
 * A TLV whose contents are `parts`, concatenated: its header is written in place, in front of
 * them, in one allocation (issuance encodes ~25 of these per certificate).
 */
export function tlv(tag: number, ...parts: readonly Der[]): Der {
  let length = 0;
  for (const p of parts) length += p.length;
  const head = headerLength(length);
  const out = Buffer.allocUnsafe(head + length);
  out[0] = tag;
  if (head === 2) out[1] = length;
  else {
    out[1] = 0x80 | (head - 2);
    for (let i = head - 1, rest = length; i >= 2; i--, rest = Math.floor(rest / 0x100)) out[i] = rest & 0xff;
  }
  let pos = head;
  for (const p of parts) {
    out.set(p, pos);
    pos += p.length;
  }
  return out;
}

export const seq = (...parts: readonly Der[]): Der => tlv(0x30, ...parts);

/** A SET OF: DER sorts the encoded elements (X.690 §11.6). */
export function setOf(...parts: readonly Der[]): Der {
  return tlv(0x31, ...[...parts].sort((a, b) => Buffer.compare(a, b)));
}

/** [n] EXPLICIT: a constructed context tag around one encoded value. */
export const explicit = (n: number, ...inner: readonly Der[]): Der => tlv(0xa0 | n, ...inner);

/** [n] IMPLICIT on a primitive value: the contents of `value` under a context tag. */
export function implicitPrimitive(n: number, contents: Der): Der {
  return tlv(0x80 | n, contents);
}

export const NULL: Der = Uint8Array.of(0x05, 0x00);
export const TRUE: Der = Uint8Array.of(0x01, 0x01, 0xff);

/** An INTEGER from unsigned big-endian magnitude bytes (leading zeros dropped, sign byte added). */
export function uintBytes(magnitude: Uint8Array): Der {
  let i = 0;
  while (i < magnitude.length - 1 && magnitude[i] === 0) i++;
  const m = magnitude.subarray(i);
  if (m.length === 0) return Uint8Array.of(0x02, 0x01, 0x00);
  return (m[0]! & 0x80) !== 0 ? tlv(0x02, Uint8Array.of(0), m) : tlv(0x02, m);
}

/** A non-negative INTEGER. */
export function int(value: number | bigint): Der {
  let v = BigInt(value);
  if (v < 0n) throw new RangeError('negative INTEGER');
  const bytes: number[] = [];
  do {
    bytes.unshift(Number(v & 0xffn));
    v >>= 8n;
  } while (v > 0n);
  return uintBytes(Uint8Array.from(bytes));
}

const oidCache = new Map<string, Der>();

/** An OBJECT IDENTIFIER from dotted text (cached: the same few dozen OIDs recur). */
export function oid(dotted: string): Der {
  const cached = oidCache.get(dotted);
  if (cached !== undefined) return cached;
  const arcs = dotted.split('.').map(Number);
  if (arcs.length < 2 || arcs.some((a) => !Number.isSafeInteger(a) || a < 0)) throw new RangeError(`bad OID ${dotted}`);
  const body: number[] = [];
  const push = (arc: number) => {
    const groups = [arc & 0x7f];
    for (let a = Math.floor(arc / 128); a > 0; a = Math.floor(a / 128)) groups.unshift((a & 0x7f) | 0x80);
    body.push(...groups);
  };
  push(arcs[0]! * 40 + arcs[1]!);
  for (const arc of arcs.slice(2)) push(arc);
  const encoded = tlv(0x06, Uint8Array.from(body));
  oidCache.set(dotted, encoded);
  return encoded;
}

/** PrintableString's alphabet (X.680 §41.4): letters, digits, space and ' ( ) + , - . / : = ? */
const PRINTABLE_STRING = /^[A-Za-z0-9 '()+,\-./:=?]*$/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Whether `text` fits a PrintableString. */
export const isPrintableString = (text: string): boolean => PRINTABLE_STRING.test(text);
/** Whether `text` fits an IA5String (ASCII, X.680 §41.4). */
export const isIa5String = (text: string): boolean => /^[^\u0080-\uffff]*$/.test(text);
/** Whether `text` has a UTF-8 encoding (no lone surrogate, which Buffer would silently turn into U+FFFD). */
export const isWellFormedUnicode = (text: string): boolean => !LONE_SURROGATE.test(text);

// The string constructors refuse what their type cannot hold rather than write malformed bytes.
// Lint (lint.ts) refuses such values with a clear message before anything is encoded: a
// RangeError from here means a value reached the encoder unchecked.

/** A UTF8String. Throws RangeError for text with a lone surrogate. */
export function utf8(text: string): Der {
  if (!isWellFormedUnicode(text)) throw new RangeError('UTF8String: the text has a lone surrogate');
  return tlv(0x0c, Buffer.from(text, 'utf8'));
}

/** A PrintableString. Throws RangeError for a character outside its alphabet. */
export function printable(text: string): Der {
  if (!isPrintableString(text))
    throw new RangeError(
      `PrintableString: ${JSON.stringify(text)} has characters outside A-Z a-z 0-9 space ' ( ) + , - . / : = ?`,
    );
  return tlv(0x13, Buffer.from(text, 'latin1'));
}

/** The contents of an IA5String (also of the IA5 GeneralNames: rfc822Name, dNSName, URI). Throws RangeError for non-ASCII text. */
export function ia5Bytes(text: string): Uint8Array {
  if (!isIa5String(text)) throw new RangeError(`IA5String: ${JSON.stringify(text)} has characters outside ASCII`);
  return Buffer.from(text, 'latin1');
}

/** An IA5String. Throws RangeError for non-ASCII text. */
export const ia5 = (text: string): Der => tlv(0x16, ia5Bytes(text));
export const octets = (bytes: Uint8Array): Der => tlv(0x04, bytes);

/** A BIT STRING with no unused bits (signatures, keys, DER-encoded contents). */
export const bits = (bytes: Uint8Array): Der => tlv(0x03, Uint8Array.of(0), bytes);

/**
 * A named-bit BIT STRING (keyUsage, reasonFlags): `set` lists bit numbers, bit 0 first. DER drops
 * trailing zero bits (X.690 §11.2.2).
 */
export function namedBits(set: readonly number[]): Der {
  if (set.length === 0) return Uint8Array.of(0x03, 0x01, 0x00);
  const highest = Math.max(...set);
  const bytes = new Uint8Array(Math.floor(highest / 8) + 1);
  for (const bit of set) bytes[bit >> 3]! |= 0x80 >> (bit & 7);
  const unused = 7 - (highest & 7);
  return tlv(0x03, Uint8Array.of(unused), bytes);
}

const two = (n: number) => (n < 10 ? `0${n}` : String(n));

/**
 * An RFC 5280 Time (§4.1.2.5) for Unix `seconds`: UTCTime through 2049, GeneralizedTime from 2050.
 */
export function time(seconds: number): Der {
  const d = new Date(seconds * 1000);
  const y = d.getUTCFullYear();
  const rest = `${two(d.getUTCMonth() + 1)}${two(d.getUTCDate())}${two(d.getUTCHours())}${two(d.getUTCMinutes())}${two(d.getUTCSeconds())}Z`;
  if (y >= 1950 && y < 2050) return tlv(0x17, Buffer.from(`${two(y % 100)}${rest}`, 'latin1'));
  return generalizedTime(seconds);
}

/** A GeneralizedTime (always, as OCSP and CRL extensions want). */
export function generalizedTime(seconds: number): Der {
  const d = new Date(seconds * 1000);
  const text = `${d.getUTCFullYear()}${two(d.getUTCMonth() + 1)}${two(d.getUTCDate())}${two(d.getUTCHours())}${two(d.getUTCMinutes())}${two(d.getUTCSeconds())}Z`;
  return tlv(0x18, Buffer.from(text, 'latin1'));
}

/** PEM armour with 64-column lines and a final newline. */
export function pem(label: string, der: Uint8Array): string {
  const b64 = Buffer.from(der.buffer, der.byteOffset, der.byteLength).toString('base64');
  let body = '';
  for (let i = 0; i < b64.length; i += 64) body += `${b64.slice(i, i + 64)}\n`;
  return `-----BEGIN ${label}-----\n${body}-----END ${label}-----\n`;
}

/** The DER inside the first PEM block with `label`; throws when there is none. */
export function fromPem(text: string, label: string): Uint8Array {
  const m = new RegExp(`-----BEGIN ${label}-----([A-Za-z0-9+/=\\s]+)-----END ${label}-----`).exec(text);
  if (m === null) throw new Error(`no ${label} PEM block`);
  return Buffer.from(m[1]!.replace(/\s+/g, ''), 'base64');
}
