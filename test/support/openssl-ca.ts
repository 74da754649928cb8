/**
 * A small CA made with the openssl CLI in a temporary directory, for tests that check what
 * src/ca/ builds against openssl: an ECDSA P-256 root (root.pem/root.key), an RSA-2048
 * intermediate it issued (int.pem/int.key), and leaves or a delegated OCSP responder issued on
 * demand. Every openssl call runs with the directory as its working directory, so tests name
 * files relative to it.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { X509Certificate, createHash, createPrivateKey, sign } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Signer } from '../../src/ca/crl.js';
import { NULL, oid, seq } from '../../src/ca/der-writer.js';
import { children, contents, oidText, readTlv } from '../../src/core/der.js';

/** The openssl config written as ca.cnf: extension sections `v3_ca`, `leaf` and `responder`. */
export const OPENSSL_CA_CNF = `[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign,digitalSignature
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[leaf]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[responder]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = OCSPSigning
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
`;

export const ROOT_SUBJECT = '/C=US/O=Certdesk Test/CN=Test Root EC';
export const INTERMEDIATE_SUBJECT = '/C=US/O=Certdesk Test/CN=Test Intermediate RSA';

/** A certificate of the fixture, read with core/der, and a Signer (SHA-256) for its key. */
export interface CaCert {
  /** The certificate's file name in the fixture directory. */
  readonly file: string;
  readonly der: Uint8Array;
  /** Subject Name, DER. */
  readonly name: Uint8Array;
  /** SubjectPublicKeyInfo, DER. */
  readonly spki: Uint8Array;
  /** Value of the subjectKeyIdentifier extension. */
  readonly ski: Uint8Array;
  /** SHA-1 of the subjectPublicKey BIT STRING's value (the OCSP key hash). */
  readonly keyHash: Uint8Array;
  readonly signer: Signer;
}

export interface OpensslCaOptions {
  /** openssl `-subj` of the intermediate; INTERMEDIATE_SUBJECT by default. */
  readonly intermediateSubject?: string;
}

export class OpensslCa {
  #dir = '';

  /** @param prefix of the temporary directory's name, e.g. 'crl-test-'. */
  constructor(readonly prefix: string) {}

  /** The fixture directory; '' before setUp. */
  get dir(): string {
    return this.#dir;
  }

  /** Runs openssl in the fixture directory; throws when it fails. Returns stdout. */
  readonly openssl = (...args: string[]): string =>
    execFileSync('openssl', args, { cwd: this.#dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

  /** Runs openssl without throwing: exit status and stdout+stderr. */
  readonly run = (...args: string[]): { status: number | null; out: string } => {
    const r = spawnSync('openssl', args, { cwd: this.#dir, encoding: 'utf8' });
    return { status: r.status, out: `${r.stdout}${r.stderr}` };
  };

  /** Absolute path of a file in the fixture directory. */
  readonly path = (name: string): string => join(this.#dir, name);

  /** The DER of a PEM certificate file in the fixture directory. */
  readonly certDer = (file: string): Uint8Array =>
    new Uint8Array(new X509Certificate(readFileSync(this.path(file))).raw);

  /** Makes the directory, ca.cnf, the root (serial random, 30 days) and the intermediate (serial 0x1000, 30 days). */
  setUp(options: OpensslCaOptions = {}): void {
    this.#dir = mkdtempSync(join(tmpdir(), this.prefix));
    writeFileSync(this.path('ca.cnf'), OPENSSL_CA_CNF);
    this.openssl(
      'req',
      '-x509',
      '-config',
      'ca.cnf',
      '-extensions',
      'v3_ca',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      'root.key',
      '-out',
      'root.pem',
      '-subj',
      ROOT_SUBJECT,
      '-days',
      '30',
    );
    this.openssl(
      'req',
      '-new',
      '-config',
      'ca.cnf',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'int.key',
      '-out',
      'int.csr',
      '-subj',
      options.intermediateSubject ?? INTERMEDIATE_SUBJECT,
    );
    this.openssl(
      'x509',
      '-req',
      '-in',
      'int.csr',
      '-CA',
      'root.pem',
      '-CAkey',
      'root.key',
      '-set_serial',
      '0x1000',
      '-days',
      '30',
      '-extfile',
      'ca.cnf',
      '-extensions',
      'v3_ca',
      '-out',
      'int.pem',
    );
  }

  /**
   * Issues `<name>.pem` (P-256 key `<name>.key`, subject CN=`<name>.example`, 10 days) from the CA
   * whose files are `<ca>.pem`/`<ca>.key`, with the ca.cnf extension section `ext`.
   */
  issue(name: string, ca: string, serial: string, ext: 'leaf' | 'responder' = 'leaf'): void {
    this.openssl(
      'req',
      '-new',
      '-config',
      'ca.cnf',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.csr`,
      '-subj',
      `/CN=${name}.example`,
    );
    this.openssl(
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      `${ca}.pem`,
      '-CAkey',
      `${ca}.key`,
      '-set_serial',
      serial,
      '-days',
      '10',
      '-extfile',
      'ca.cnf',
      '-extensions',
      ext,
      '-out',
      `${name}.pem`,
    );
  }

  /** Reads a certificate and its private key (RSA signs sha256WithRSAEncryption, else ecdsa-with-SHA256). */
  cert(certFile: string, keyFile: string, rsa: boolean): CaCert {
    const raw = this.certDer(certFile);
    const f = children(raw, children(raw, readTlv(raw, 0))[0]!);
    const off = f[0]!.tag === 0xa0 ? 1 : 0;
    const spkiT = f[5 + off]!;
    const keyHash = createHash('sha1')
      .update(contents(raw, children(raw, spkiT)[1]!).subarray(1))
      .digest();
    let ski: Uint8Array | undefined;
    for (const ext of children(
      raw,
      children(
        raw,
        f.find((t) => t.tag === 0xa3)!,
      )[0]!,
    )) {
      const e = children(raw, ext);
      if (oidText(raw, e[0]!) === '2.5.29.14') {
        const inner = contents(raw, e[e.length - 1]!);
        ski = contents(inner, readTlv(inner, 0)).slice();
      }
    }
    if (ski === undefined) throw new Error(`${certFile} has no subjectKeyIdentifier`);
    const key = createPrivateKey(readFileSync(this.path(keyFile)));
    const signer: Signer = rsa
      ? { algorithm: seq(oid('1.2.840.113549.1.1.11'), NULL), sign: (d) => sign('sha256', d, key) }
      : { algorithm: seq(oid('1.2.840.10045.4.3.2')), sign: (d) => sign('sha256', d, key) };
    return {
      file: certFile,
      der: raw,
      name: raw.slice(f[4 + off]!.start, f[4 + off]!.end),
      spki: raw.slice(spkiT.start, spkiT.end),
      ski,
      keyHash,
      signer,
    };
  }

  /** Removes the directory (safe to call when setUp never ran). */
  cleanUp(): void {
    if (this.#dir !== '') rmSync(this.#dir, { recursive: true, force: true });
  }
}
