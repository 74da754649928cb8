// Decoding of PKCS#10 certificate requests for the one CSR reader (core/csr.ts): the PEM/base64
// text layer, and the requested subjectAltName extension. Imports only src/core.
import { TAG, children, expectTag, oidText, type Tlv } from './der.js';

const SAN_OID = '2.5.29.17';
const EXTENSION_REQUEST_OID = '1.2.840.113549.1.9.14';

/** The PEM labels a certificate request may carry (RFC 7468 §7; NEW is the legacy Netscape label). */
export const CSR_PEM_LABELS: readonly string[] = ['CERTIFICATE REQUEST', 'NEW CERTIFICATE REQUEST'];

/**
 * Decodes a certificate request given as PEM text (label CERTIFICATE REQUEST or NEW CERTIFICATE
 * REQUEST, LF or CRLF, surrounding whitespace allowed) or as a bare base64 body, to fresh DER
 * bytes. Only the text layer is checked, not the DER inside. Pure and never throws: what is
 * wrong comes back as `problem`, a complete sentence about "the CSR" that callers wrap in their
 * own error. Texts longer than `maxChars` characters are refused before anything else.
 */
export function decodeCsrText(text: string, maxChars: number): { der: Uint8Array } | { problem: string } {
  if (text.length > maxChars) return { problem: `The CSR is larger than ${maxChars / 1024} KiB.` };
  const trimmed = text.trim();
  if (trimmed === '') return { problem: 'The CSR is empty.' };
  let body = trimmed;
  if (trimmed.startsWith('-----')) {
    const begin = /^-----BEGIN ([A-Z0-9 ]{1,64})-----/.exec(trimmed);
    if (!begin?.[1])
      return { problem: 'The CSR could not be parsed: its "-----BEGIN CERTIFICATE REQUEST-----" line is damaged.' };
    const label = begin[1];
    if (!CSR_PEM_LABELS.includes(label)) {
      return { problem: `The CSR could not be parsed: the PEM block is a "${label}", not a "CERTIFICATE REQUEST".` };
    }
    const endLine = `-----END ${label}-----`;
    const end = trimmed.indexOf(endLine, begin[0].length);
    if (end < 0) return { problem: `The CSR could not be parsed: it has no "${endLine}" line; it seems truncated.` };
    if (end + endLine.length !== trimmed.length)
      return { problem: `The CSR could not be parsed: there is text after "${endLine}".` };
    body = trimmed.slice(begin[0].length, end);
  }
  const b64 = body.replace(/\s+/g, '');
  const bad = /[^A-Za-z0-9+/=]/.exec(b64);
  if (bad) {
    return {
      problem: `The CSR could not be parsed: it is neither PEM nor valid base64 (invalid character ${JSON.stringify(bad[0])}).`,
    };
  }
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64) || b64.length % 4 === 1) {
    return {
      problem: 'The CSR could not be parsed: it is neither PEM nor valid base64 (misplaced padding or wrong length).',
    };
  }
  const der = new Uint8Array(Buffer.from(b64, 'base64'));
  if (der.length === 0) return { problem: 'The CSR is empty.' };
  return { der };
}

/**
 * The extnValue OCTET STRING of the first subjectAltName extension in the extensionRequest
 * attribute (PKCS#9, 1.2.840.113549.1.9.14) of a request's attributes ([0] IMPLICIT SET OF
 * Attribute, RFC 2986 §4.1), or undefined when there is none. Throws DerError (as core/der does)
 * when an attribute or extension met on the way does not decode.
 */
export function requestedSanExtension(der: Uint8Array, attributes: Tlv): Tlv | undefined {
  for (const attribute of children(der, attributes)) {
    const [type, values] = children(der, expectTag(attribute, TAG.SEQUENCE));
    if (type === undefined || oidText(der, type) !== EXTENSION_REQUEST_OID) continue;
    const [extensions] = children(der, expectTag(values, TAG.SET));
    for (const extension of children(der, expectTag(extensions, TAG.SEQUENCE))) {
      const parts = children(der, expectTag(extension, TAG.SEQUENCE));
      const octets = expectTag(parts[parts.length - 1], TAG.OCTET_STRING);
      if (oidText(der, parts[0]!) === SAN_OID) return octets;
    }
  }
  return undefined;
}
