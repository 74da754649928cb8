// reflect-metadata must be loaded before @peculiar/x509 (its ASN.1 schemas use decorators).
import 'reflect-metadata';
import { KeyObject, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { CertdeskError } from '../../core/index.js';
import { checkDnsName } from '../../validation/index.js';

// Key generation for the subscriber (POST /ValidateName with GeneratePrivateKey): a service the RA
// offers its customers, not a check (src/validation/ only checks) and not the CA's business (the
// CA never sees a subscriber's private key; its own signing keys live in src/ca/keys.ts).

/** A key pair made for a customer who asked the service to generate one (spec 4.18). */
export interface GeneratedKeyAndCsr {
  /** PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), ending in a newline. */
  privateKeyPem: string;
  /** PKCS#10 PEM (`-----BEGIN CERTIFICATE REQUEST-----`), ending in a newline. */
  csrPem: string;
}

// RSA-2048 with SHA-256: the key the free automated DV product and /DNSData, /FileData expect
// (spec 8: "a 2048-bit RSA key"), and accepted by every client.
const RSA_KEY: webcrypto.RsaHashedKeyGenParams = {
  name: 'RSASSA-PKCS1-v1_5',
  modulusLength: 2048,
  publicExponent: new Uint8Array([1, 0, 1]),
  hash: 'SHA-256',
};

/** X.520 ub-common-name: a longer name goes only into the SAN extension. */
const MAX_COMMON_NAME = 64;

/**
 * Generates a fresh RSA-2048 key and a SHA-256 CSR for `commonName` (ValidateName with
 * GeneratePrivateKey, spec 4.18): subject CN=<name> (left out when longer than 64 characters),
 * SAN dNSName <name>, plus the bare name when it starts with `www.`. The name is normalized
 * first (lower-case, punycode). Nothing is stored or logged: the caller hands the key out once.
 * Throws `CertdeskError('invalidName', <problem>, {field: 'CommonName'})` for a name that
 * `checkDnsName` refuses (wildcards allowed).
 */
export async function generateKeyAndCsr(commonName: string): Promise<GeneratedKeyAndCsr> {
  const checked = checkDnsName(commonName, { allowWildcard: true });
  if (!checked.ok) throw new CertdeskError('invalidName', checked.problem, { field: 'CommonName' });
  const name = checked.name;
  const sanNames = name.startsWith('www.') ? [name, name.slice(4)] : [name];

  const keys = await webcrypto.subtle.generateKey(RSA_KEY, true, ['sign', 'verify']);
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: name.length <= MAX_COMMON_NAME ? [{ CN: [name] }] : [],
    keys,
    signingAlgorithm: RSA_KEY,
    extensions: [new x509.SubjectAlternativeNameExtension(sanNames.map((value) => ({ type: 'dns', value })))],
  });
  const privateKeyPem = KeyObject.from(keys.privateKey).export({ type: 'pkcs8', format: 'pem' }).toString();
  return {
    privateKeyPem: withFinalNewline(privateKeyPem),
    // The library writes no final newline ; clients concatenate PEM blocks.
    csrPem: withFinalNewline(csr.toString('pem')),
  };
}

function withFinalNewline(pem: string): string {
  const text = pem.replace(/\r\n/g, '\n');
  return text.endsWith('\n') ? text : `${text}\n`;
}
