import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CertdeskError } from '../core/index.js';
import { MAX_CSR_CHARS, parseCsr, toParsedCsr, type CsrInfo } from './csr.js';

// Real CSRs from the openssl CLI, made once per run.
let dir = '';
const openssl = (...args: string[]): Buffer =>
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
const read = (file: string): string => fs.readFileSync(path.join(dir, file), 'utf8');
const toPem = (der: Uint8Array, label = 'CERTIFICATE REQUEST'): string =>
  `-----BEGIN ${label}-----\n${Buffer.from(der)
    .toString('base64')
    .replace(/.{1,64}/g, '$&\n')}-----END ${label}-----\n`;

const SUBJECT =
  '/CN=www.example.org/O=Example Org/OU=Web Team/L=Springfield/ST=Oregon/C=US/emailAddress=hostmaster@example.org';
const SAN = 'subjectAltName=DNS:A.example.org,DNS:b.example.org,IP:192.0.2.7,IP:2001:db8::1,email:sec@example.org';

const KEYS: Record<string, string[]> = {
  rsa2048: ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048'],
  rsa4096: ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:4096'],
  p256: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256'],
  p384: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-384'],
  p192: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-192'],
  dsa2048: ['-paramfile', 'dsa.params'],
  ed25519: ['-algorithm', 'ED25519'],
};

interface OkCase {
  id: string;
  key: string;
  digest?: string;
  signatureAlgorithm: string;
  keyAlgorithm: CsrInfo['keyAlgorithm'];
  keyLength: number;
  curve?: string;
}
const OK_CASES: OkCase[] = [
  {
    id: 'ok/rsa-2048',
    key: 'rsa2048',
    digest: 'sha256',
    signatureAlgorithm: 'sha256WithRSAEncryption',
    keyAlgorithm: 'RSA',
    keyLength: 2048,
  },
  {
    id: 'ok/rsa-2048-sha1',
    key: 'rsa2048',
    digest: 'sha1',
    signatureAlgorithm: 'sha1WithRSAEncryption',
    keyAlgorithm: 'RSA',
    keyLength: 2048,
  },
  {
    id: 'ok/rsa-4096',
    key: 'rsa4096',
    digest: 'sha512',
    signatureAlgorithm: 'sha512WithRSAEncryption',
    keyAlgorithm: 'RSA',
    keyLength: 4096,
  },
  {
    id: 'ok/ec-p256',
    key: 'p256',
    digest: 'sha256',
    signatureAlgorithm: 'ecdsa-with-SHA256',
    keyAlgorithm: 'ECC',
    keyLength: 256,
    curve: 'P-256',
  },
  {
    id: 'ok/ec-p384',
    key: 'p384',
    digest: 'sha384',
    signatureAlgorithm: 'ecdsa-with-SHA384',
    keyAlgorithm: 'ECC',
    keyLength: 384,
    curve: 'P-384',
  },
  {
    id: 'ok/ec-p192',
    key: 'p192',
    digest: 'sha256',
    signatureAlgorithm: 'ecdsa-with-SHA256',
    keyAlgorithm: 'ECC',
    keyLength: 192,
    curve: 'P-192',
  },
  {
    id: 'ok/dsa-2048',
    key: 'dsa2048',
    digest: 'sha256',
    signatureAlgorithm: 'dsa_with_SHA256',
    keyAlgorithm: 'DSA',
    keyLength: 2048,
  },
  { id: 'ok/ed25519', key: 'ed25519', signatureAlgorithm: 'ED25519', keyAlgorithm: 'Ed25519', keyLength: 256 },
];

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'certdesk-csr-'));
  openssl('genpkey', '-genparam', '-algorithm', 'DSA', '-pkeyopt', 'dsa_paramgen_bits:2048', '-out', 'dsa.params');
  for (const [name, args] of Object.entries(KEYS)) openssl('genpkey', ...args, '-out', `${name}.key`);
  for (const c of OK_CASES) {
    const digest = c.digest ? [`-${c.digest}`] : [];
    openssl(
      'req',
      '-new',
      ...digest,
      '-key',
      `${c.key}.key`,
      '-subj',
      SUBJECT,
      '-addext',
      SAN,
      '-out',
      `${c.id.slice(3)}.csr`,
    );
    openssl('req', '-in', `${c.id.slice(3)}.csr`, '-outform', 'DER', '-out', `${c.id.slice(3)}.der`);
  }
  openssl(
    'req',
    '-new',
    '-key',
    'rsa2048.key',
    '-sha256',
    '-sigopt',
    'rsa_padding_mode:pss',
    '-subj',
    '/CN=pss.example.org',
    '-out',
    'pss.csr',
  );
  openssl(
    'req',
    '-x509',
    '-new',
    '-key',
    'p256.key',
    '-subj',
    '/CN=cert.example.org',
    '-days',
    '1',
    '-out',
    'cert.pem',
  );
  openssl('req', '-new', '-key', 'p256.key', '-subj', '/CN=plain.example.org', '-out', 'plain.csr');
}, 120_000);

afterAll(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** The error parseCsr threw, failing the test if it returned or threw anything else. */
function csrError(input: string): CertdeskError {
  try {
    parseCsr(input);
  } catch (e) {
    expect(e).toBeInstanceOf(CertdeskError);
    return e as CertdeskError;
  }
  throw new Error('parseCsr accepted the input');
}

describe('parseCsr', () => {
  describe('reads every field of CSRs made by openssl', () => {
    it.each(OK_CASES)('$id', (c) => {
      const file = c.id.slice(3);
      const info = parseCsr(read(`${file}.csr`));
      const der = fs.readFileSync(path.join(dir, `${file}.der`));
      const digest = (alg: string): string =>
        openssl('dgst', `-${alg}`, '-r', `${file}.der`).toString().split(' ')[0]!.toUpperCase();
      const pubkey = openssl('req', '-in', `${file}.csr`, '-noout', '-pubkey').toString();
      expect(info).toMatchObject({
        commonName: 'www.example.org',
        organization: 'Example Org',
        organizationUnit: 'Web Team',
        locality: 'Springfield',
        state: 'Oregon',
        country: 'US',
        email: 'hostmaster@example.org',
        dnsNames: ['a.example.org', 'b.example.org'],
        ipAddresses: ['192.0.2.7', '2001:db8::1'],
        signatureAlgorithm: c.signatureAlgorithm,
        keyAlgorithm: c.keyAlgorithm,
        keyLength: c.keyLength,
        hashMd5: digest('md5'),
        hashSha256: digest('sha256'),
      });
      expect(info.hashMd5).toMatch(/^[0-9A-F]{32}$/);
      expect(Buffer.from(info.der).equals(der)).toBe(true);
      expect(Buffer.from(info.spkiDer).toString('base64')).toBe(pubkey.replace(/-----[^-]+-----|\s/g, ''));
      expect(info.curve).toBe(c.curve);
      if (c.keyAlgorithm === 'RSA') {
        const modulus = openssl('req', '-in', `${file}.csr`, '-noout', '-modulus')
          .toString()
          .trim()
          .replace('Modulus=', '');
        expect(info.rsa).toEqual({ modulus: BigInt(`0x${modulus}`), publicExponent: 65537n });
      } else {
        expect(info.rsa).toBeUndefined();
      }
    });

    it('takes the e-mail from an rfc822Name SAN when the subject has none', () => {
      openssl(
        'req',
        '-new',
        '-key',
        'p256.key',
        '-subj',
        '/CN=mail.example.org',
        '-addext',
        'subjectAltName=email:who@example.org',
        '-out',
        'mail.csr',
      );
      expect(parseCsr(read('mail.csr'))).toMatchObject({ email: 'who@example.org', organization: '', dnsNames: [] });
    });

    it('returns empty strings and lists for a CSR with only a common name', () => {
      expect(parseCsr(read('plain.csr'))).toMatchObject({
        commonName: 'plain.example.org',
        organization: '',
        organizationUnit: '',
        locality: '',
        state: '',
        country: '',
        email: '',
        dnsNames: [],
        ipAddresses: [],
      });
    });
  });

  describe('accepts the encodings clients send', () => {
    const variants: [string, (pem: string, der: Buffer) => string][] = [
      ['ok/lf', (pem) => pem],
      ['ok/crlf', (pem) => pem.replace(/\n/g, '\r\n')],
      ['ok/surrounding-whitespace', (pem) => `\n\n  \t${pem}\n  \n`],
      ['ok/new-certificate-request-label', (_pem, der) => toPem(der, 'NEW CERTIFICATE REQUEST')],
      ['ok/raw-base64-lines', (pem) => pem.replace(/-----[^-]+-----/g, '')],
      ['ok/raw-base64-one-line', (_pem, der) => der.toString('base64')],
      ['ok/one-line-pem', (pem) => pem.replace(/\n/g, '')],
      ['ok/missing-base64-padding', (_pem, der) => der.toString('base64').replace(/=+$/, '')],
    ];
    it.each(variants)('%s', (_id, variant) => {
      const der = fs.readFileSync(path.join(dir, 'rsa-2048.der'));
      const info = parseCsr(variant(read('rsa-2048.csr'), der));
      expect(Buffer.from(info.der).equals(der)).toBe(true);
      expect(info.commonName).toBe('www.example.org');
    });
  });

  describe('refuses damaged or foreign input with invalidCsr', () => {
    const validDer = (): Buffer => fs.readFileSync(path.join(dir, 'rsa-2048.der'));
    const cases: [string, () => string, RegExp][] = [
      ['fail/empty', () => '', /empty/],
      ['fail/whitespace-only', () => ' \r\n\t ', /empty/],
      ['fail/too-large', () => `${read('rsa-2048.csr')}${' '.repeat(MAX_CSR_CHARS)}`, /64 KiB/],
      ['fail/certificate', () => read('cert.pem'), /"CERTIFICATE", not a "CERTIFICATE REQUEST"/],
      ['fail/private-key', () => read('p256.key'), /"PRIVATE KEY", not a "CERTIFICATE REQUEST"/],
      [
        'fail/garbled-begin-line',
        () => read('rsa-2048.csr').replace('BEGIN ', 'BEGIN-'),
        /"-----BEGIN CERTIFICATE REQUEST-----" line is damaged/,
      ],
      [
        'fail/no-end-line',
        () => read('rsa-2048.csr').replace(/-----END[^\n]+\n?/, ''),
        /no "-----END CERTIFICATE REQUEST-----" line; it seems truncated/,
      ],
      [
        'fail/mismatched-end-label',
        () => read('rsa-2048.csr').replace('BEGIN ', 'BEGIN NEW '),
        /END NEW CERTIFICATE REQUEST/,
      ],
      [
        'fail/text-after-end',
        () => `${read('rsa-2048.csr')}garbage\n`,
        /there is text after "-----END CERTIFICATE REQUEST-----"/,
      ],
      ['fail/two-csrs', () => `${read('rsa-2048.csr')}${read('ec-p256.csr')}`, /after/],
      [
        'fail/text-before-begin',
        () => `Here is my CSR:\n${read('rsa-2048.csr')}`,
        /neither PEM nor valid base64 \(invalid character ":"\)/,
      ],
      ['fail/invalid-base64-character', () => read('rsa-2048.csr').replace(/\n(.)/, '\n$1!'), /invalid character "!"/],
      [
        'fail/misplaced-padding',
        () => toPem(validDer()).replace(/\n(.)/, '\n=$1'),
        /neither PEM nor valid base64 \(misplaced padding/,
      ],
      ['fail/truncated-der', () => toPem(validDer().subarray(0, 500)), /truncated/],
      [
        'fail/trailing-der-bytes',
        () => toPem(Buffer.concat([validDer(), Buffer.from([0, 0])])),
        /2 bytes of trailing data/,
      ],
      ['fail/not-a-csr', () => toPem(Buffer.from([0x30, 0x03, 0x02, 0x01, 0x00])), /not a PKCS#10/],
      [
        'fail/certificate-der-under-csr-label',
        () => read('cert.pem').replace(/CERTIFICATE/g, 'CERTIFICATE REQUEST'),
        /PKCS#10|version/,
      ],
      ['fail/rsassa-pss', () => read('pss.csr'), /RSASSA-PSS/],
      ['fail/not-a-string', () => 42 as unknown as string, /string/],
    ];
    it.each(cases)('%s', (_id, input, message) => {
      const error = csrError(input());
      expect(error.kind).toBe('invalidCsr');
      expect(error.field).toBe('CSR');
      expect(error.message).toMatch(message);
    });

    it('fail/tampered-subject: a byte changed inside the signed part breaks the signature', () => {
      const der = validDer();
      const at = der.indexOf('www.example.org');
      expect(at).toBeGreaterThan(0);
      der[at] = 'v'.charCodeAt(0);
      const error = csrError(toPem(der));
      expect(error.kind).toBe('invalidCsr');
      expect(error.message).toMatch(/signature is invalid/);
    });

    it('fail/tampered-signature: a byte changed in the signature value', () => {
      const der = validDer();
      der[der.length - 5] = der[der.length - 5]! ^ 0x01;
      expect(csrError(toPem(der)).message).toMatch(/signature is invalid/);
    });

    it('fail/transplanted-signature: a genuine signature by the same key over another request', () => {
      openssl(
        'req',
        '-new',
        '-sha256',
        '-key',
        'rsa2048.key',
        '-subj',
        '/CN=other.example.org',
        '-outform',
        'DER',
        '-out',
        'other.der',
      );
      const other = fs.readFileSync(path.join(dir, 'other.der'));
      const der = validDer();
      // RSA-2048: the signature value is the last 256 bytes of either request.
      other.copy(der, der.length - 256, other.length - 256);
      expect(csrError(toPem(der)).message).toMatch(/signature is invalid/);
    });
  });

  describe('fuzzing', () => {
    it('either parses or throws invalidCsr for 2,000 hostile inputs', () => {
      const inputs = fuzzInputs(2000);
      expect(inputs).toHaveLength(2000);
      let parsed = 0;
      for (const input of inputs) {
        try {
          parseCsr(input);
          parsed += 1;
        } catch (e) {
          if (!(e instanceof CertdeskError) || e.kind !== 'invalidCsr' || e.message === '') {
            throw new Error(`unexpected ${String(e)} for input ${JSON.stringify(input.slice(0, 200))}`);
          }
        }
      }
      // Only untouched inputs (a truncation at the full length) may parse.
      expect(parsed).toBeLessThan(20);
    });
  });
});

describe('toParsedCsr', () => {
  it('builds the spec 2.5 ParsedCSR body with its spellings', () => {
    const info = parseCsr(read('ec-p384.csr'));
    expect(toParsedCsr(info, 'uv-123')).toEqual({
      CommonName: 'www.example.org',
      Organization: 'Example Org',
      OrganizationUnit: 'Web Team',
      Locality: 'Springfield',
      State: 'Oregon',
      Country: 'US',
      Email: 'hostmaster@example.org',
      SignaturAlgorithm: 'ecdsa-with-SHA384',
      KeyEncryptionAlgorithm: 'ECC',
      KeyLength: 384,
      HashMD5: info.hashMd5,
      HashSHA256: info.hashSha256,
      UniqueValue: 'uv-123',
    });
  });

  it.each([
    ['ok/rsa', 'rsa-4096.csr', 'RSA', 4096],
    ['ok/dsa', 'dsa-2048.csr', 'DSA', 2048],
    ['ok/ed25519', 'ed25519.csr', 'Ed25519', 256],
  ])('%s: KeyEncryptionAlgorithm and integer KeyLength', (_id, file, algorithm, bits) => {
    const body = toParsedCsr(parseCsr(read(file)), '');
    expect(body.KeyEncryptionAlgorithm).toBe(algorithm);
    expect(body.KeyLength).toBe(bits);
    expect(Number.isInteger(body.KeyLength)).toBe(true);
  });
});

/** Deterministic (seeded) hostile inputs: random PEM, truncations, byte flips, random text. */
function fuzzInputs(count: number): string[] {
  let seed = 0x5eed1234;
  const random = (): number => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number): number => Math.floor(random() * n);
  const bytes = (n: number): Buffer => Buffer.from(Array.from({ length: n }, () => int(256)));
  const ders = ['rsa-2048', 'ec-p256', 'dsa-2048', 'ed25519'].map((f) => fs.readFileSync(path.join(dir, `${f}.der`)));
  const pem = read('ec-p256.csr');
  const out: string[] = [];
  // Random bytes under a CSR label, and random DER-looking bytes (a SEQUENCE header first).
  for (let i = 0; i < 300; i++) out.push(toPem(bytes(int(1200))));
  for (let i = 0; i < 100; i++)
    out.push(toPem(Buffer.concat([Buffer.from([0x30, 0x82, int(8), int(256)]), bytes(int(900))])));
  // Truncations of a valid DER (every 2 bytes) and of a valid PEM text (every 3 characters).
  const rsa = ders[0]!;
  for (let n = 0; n < rsa.length; n += 2) out.push(toPem(rsa.subarray(0, n)));
  for (let n = 0; n < pem.length; n += 3) out.push(pem.slice(0, n));
  // Random text, some of it with PEM armour and non-ASCII characters.
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=- \n\r\t!é€\u0000';
  for (let i = 0; i < 200; i++) {
    const text = Array.from({ length: int(400) }, () => alphabet[int(alphabet.length)]).join('');
    out.push(i % 2 === 0 ? text : `-----BEGIN CERTIFICATE REQUEST-----\n${text}\n-----END CERTIFICATE REQUEST-----`);
  }
  // Single-byte flips of valid DERs of each key type, re-encoded as PEM; the rest of the budget.
  while (out.length < count) {
    const der = Buffer.from(ders[int(ders.length)]!);
    const at = int(der.length);
    der[at] = der[at]! ^ (1 + int(255));
    out.push(toPem(der));
  }
  return out.slice(0, count);
}
