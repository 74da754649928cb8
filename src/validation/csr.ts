import { MAX_CSR_SIZE, readCsr, verifyCsr, type VerifiedCsr } from '../core/index.js';

export type { KeyAlgorithm } from '../core/index.js';

/**
 * Everything certdesk needs from a PKCS#10 request whose self-signature has been verified: the
 * core reader's VerifiedCsr (src/core/csr.ts, csr-verify.ts). The CA's `checkCsr` takes it as it
 * is, without reading the request again.
 */
export type CsrInfo = VerifiedCsr;

/** The `ParsedCSR` member of POST /ValidateCSR (spec 2.5), spellings as the spec has them. */
export type ParsedCsr = ReturnType<typeof toParsedCsr>;

/** The one size limit of the CSR reader (characters of text), under the name callers know. */
export const MAX_CSR_CHARS = MAX_CSR_SIZE;

/**
 * Parses a PKCS#10 request given as PEM (`CERTIFICATE REQUEST` or `NEW CERTIFICATE REQUEST`
 * label, LF or CRLF, surrounding whitespace allowed) or as a bare base64 body, and verifies its
 * self-signature: `readCsr` then `verifyCsr` of src/core. Pure: no I/O, no state. Any signature
 * algorithm node:crypto verifies is read (POST /ValidateCSR shows what a request holds); what the
 * CA certifies is decided by its `checkCsr`.
 * Throws `CertdeskError('invalidCsr', <what is wrong>, {field: 'CSR'})` for every input that is
 * not a complete, well-signed request (too large, bad PEM or base64, truncated or trailing data,
 * unsupported algorithms such as RSASSA-PSS, bad signature) and never any other error.
 */
export function parseCsr(pem: string): CsrInfo {
  return verifyCsr(readCsr(pem));
}

/** The spec 2.5 `ParsedCSR` body for a parsed request and its brand's UniqueValue. */
export function toParsedCsr(info: CsrInfo, uniqueValue: string) {
  return {
    CommonName: info.commonName,
    Organization: info.organization,
    OrganizationUnit: info.organizationUnit,
    Locality: info.locality,
    State: info.state,
    Country: info.country,
    Email: info.email,
    SignaturAlgorithm: info.signatureAlgorithm,
    KeyEncryptionAlgorithm: info.keyAlgorithm,
    KeyLength: info.keyLength,
    HashMD5: info.hashMd5,
    HashSHA256: info.hashSha256,
    UniqueValue: uniqueValue,
  };
}
