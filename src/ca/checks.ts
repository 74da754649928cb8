/**
 * The CA's own gate on what it certifies: a PKCS#10 request must be well formed, its key must
 * pass the Baseline Requirements' key checks (BR §6.1.5, §6.1.6; Boulder's goodkey), its signature
 * algorithm must be one the CA accepts, and only then is its self-signature verified. Requests
 * are read by the one reader of src/core (readCsr, verifyCsr), the same code the RA's checks
 * use. The CA trusts no earlier parse but that reader's own verified result (a VerifiedCsr, which
 * cannot be imitated): anything else it is given, it reads and verifies itself, as Boulder's CA
 * re-checks what its RA sends. The only way to obtain a CheckedCsr is checkCsr.
 */
import { createHash } from 'node:crypto';
import {
  CertdeskError,
  invalidCsr,
  isVerifiedCsr,
  readCsr,
  signatureAlgorithm,
  signatureAlgorithmName,
  verifyCsr,
  type CsrRequest,
  type VerifiedCsr,
} from '../core/index.js';
import { isNull, readSpki } from '../core/spki.js';
import { assessKey, type CaKeyType, type CheckedKey } from './key-policy.js';

export { checkPublicKey, type CaKeyType, type CheckedKey } from './key-policy.js';

declare const checked: unique symbol;

/** A PKCS#10 request whose self-signature verified and whose key passed checkPublicKey. Only checkCsr makes one. */
export interface CheckedCsr {
  readonly [checked]: true;
  readonly der: Uint8Array;
  readonly key: CheckedKey;
  /** Subject commonName ('' when absent) and SAN dNSNames (lower-cased, request order) — informational. */
  readonly commonName: string;
  readonly dnsNames: readonly string[];
  /** The request as the core reader verified it: every name, the hashes, the key's description. */
  readonly request: VerifiedCsr;
}

/** The signature algorithms the CA accepts (SHA-2 with RSA PKCS#1 v1.5 or ECDSA), by OID. */
const ACCEPTED_SIGNATURES: Record<string, CaKeyType> = {
  '1.2.840.113549.1.1.11': 'rsa',
  '1.2.840.113549.1.1.12': 'rsa',
  '1.2.840.113549.1.1.13': 'rsa',
  '1.2.840.10045.4.3.2': 'ecdsa',
  '1.2.840.10045.4.3.3': 'ecdsa',
  '1.2.840.10045.4.3.4': 'ecdsa',
};

/**
 * Checks a PKCS#10 request for certification: DER bytes, or PEM text labelled CERTIFICATE REQUEST
 * or NEW CERTIFICATE REQUEST (a bare base64 body is also read), read by core's readCsr; or a
 * VerifiedCsr (as `parseCsr` of src/validation returns), which is not read or verified again
 * while its bytes are those that were verified (else they are read afresh).
 * Then the key is checked with the rules of checkPublicKey, the signature algorithm against the
 * CA's list, and the self-signature verified (core's verifyCsr) — in that order, so a weak key is
 * reported as such even in a damaged request.
 * Throws `CertdeskError` of kind `invalidCsr` (unparsable, unsupported signature algorithm,
 * signature that does not verify) or `badKey`, with field 'CSR', and never anything else.
 */
export function checkCsr(input: Uint8Array | string | VerifiedCsr): CheckedCsr {
  try {
    // A VerifiedCsr whose bytes were changed after it was verified is read afresh like any bytes.
    const given = isVerifiedCsr(input) && intact(input) ? input : undefined;
    const request = given ?? readCsr(isVerifiedCsr(input) ? input.der : (input as Uint8Array | string));
    // Key policy before the signature, so a weak key is reported as such even in a good request.
    // The key keeps its own copy of the SPKI: later changes to the request cannot alter it.
    const key = assessKey(readSpki(request.spkiDer.slice()));
    checkSignatureAlgorithm(request, key);
    const verified = given ?? verifyCsr(request);
    const result = {
      der: verified.der,
      key,
      commonName: verified.commonName,
      dnsNames: verified.dnsNames,
      request: verified,
    };
    return Object.freeze(result) as unknown as CheckedCsr;
  } catch (e) {
    if (e instanceof CertdeskError) throw e;
    throw invalidCsr('The CSR could not be parsed: it is not a valid PKCS#10 certificate request.', e);
  }
}

/** Whether a verified request's bytes (its SPKI, names and signature included) are still those verified. */
function intact(request: VerifiedCsr): boolean {
  return createHash('sha256').update(request.der).digest('hex').toUpperCase() === request.hashSha256;
}

/** The CA's signature algorithm policy: SHA-2, PKCS#1 v1.5 or ECDSA, matching the key. */
function checkSignatureAlgorithm(request: CsrRequest, key: CheckedKey): void {
  const oid = request.signatureOid;
  const name = signatureAlgorithmName(oid);
  const keyType = ACCEPTED_SIGNATURES[oid];
  if (keyType === undefined) {
    if (signatureAlgorithm(oid)?.hash === 'sha1')
      throw invalidCsr(`The CSR is signed with ${name}: SHA-1 signatures are not accepted; sign it with SHA-256.`);
    throw invalidCsr(
      `The CSR is signed with ${name}, which is not accepted: use sha256WithRSAEncryption or ecdsa-with-SHA256 (or SHA-384/512).`,
    );
  }
  // RSA signature parameters are NULL, ECDSA's absent (RFC 4055, 5758); NULL is tolerated for both.
  if (request.signatureParams !== undefined && !isNull(request.signatureParams)) {
    throw invalidCsr(`The CSR could not be parsed: its ${name} signature algorithm has unexpected parameters.`);
  }
  if (keyType !== key.type)
    throw invalidCsr(
      `The CSR signature algorithm ${name} does not match its ${key.type === 'rsa' ? 'RSA' : 'ECDSA'} key.`,
    );
}
