/** Certs-only PKCS#7 (RFC 5652 SignedData with no signers), the .p7b bundle format. */
import { oid, seq, tlv } from './der-writer.js';

const SIGNED_DATA = oid('1.2.840.113549.1.7.2');
const DATA = oid('1.2.840.113549.1.7.1');
const V1 = Uint8Array.of(0x02, 0x01, 0x01);
const EMPTY_SET = Uint8Array.of(0x31, 0x00);

/**
 * DER ContentInfo{signedData} carrying `certificates` in the given order. The certificates field
 * is a SET OF, but the order is kept (not DER-sorted) because consumers read it as the chain
 * order, as every CA's .p7b does.
 */
export function certsOnlyPkcs7(certificates: readonly Uint8Array[]): Uint8Array {
  const signedData = seq(
    V1,
    EMPTY_SET,
    seq(DATA),
    ...(certificates.length > 0 ? [tlv(0xa0, ...certificates)] : []),
    EMPTY_SET,
  );
  return seq(SIGNED_DATA, tlv(0xa0, signedData));
}
