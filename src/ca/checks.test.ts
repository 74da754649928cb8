import { execFileSync } from 'node:child_process';
import {
  checkPrimeSync,
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  generatePrimeSync,
  randomBytes,
  sign,
} from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { children, readTlv } from '../core/der.js';
import { CertdeskError } from '../core/index.js';
import { checkCsr, checkPublicKey, type CheckedCsr, type CheckedKey } from './checks.js';

// ---- Fixtures: real keys and CSRs from the openssl CLI, made once per file ----

let dir = '';
const openssl = (...args: string[]): Buffer =>
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
const pem = (name: string): string => readFileSync(join(dir, `${name}.csr`), 'utf8');
const der = (name: string): Buffer => readFileSync(join(dir, `${name}.der`));
const toPem = (bytes: Uint8Array, label = 'CERTIFICATE REQUEST'): string =>
  `-----BEGIN ${label}-----\n${Buffer.from(bytes)
    .toString('base64')
    .replace(/.{1,64}/g, '$&\n')}-----END ${label}-----\n`;

const KEYS: Record<string, string[]> = {
  rsa2048: ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048'],
  rsa3072: ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:3072'],
  rsaBigE: [
    '-algorithm',
    'RSA',
    '-pkeyopt',
    'rsa_keygen_bits:2048',
    '-pkeyopt',
    `rsa_keygen_pubexp:${(1n << 255n) + 1n}`,
  ],
  p256: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256'],
  p384: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-384'],
  rsa1024: ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:1024'],
  rsaE3: ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-pkeyopt', 'rsa_keygen_pubexp:3'],
  p192: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-192'],
  p224: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-224'],
  p521: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-521'],
  secp256k1: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:secp256k1'],
  brainpool: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:brainpoolP256r1'],
  ed25519: ['-algorithm', 'ED25519'],
  ed448: ['-algorithm', 'ED448'],
  rsaPss: ['-algorithm', 'RSA-PSS', '-pkeyopt', 'rsa_keygen_bits:2048'],
  dsa: ['-paramfile', 'dsa.params'],
};

const SUBJECT = '/CN=Www.Example.com/O=Example Org';
const SAN =
  'subjectAltName=DNS:Www.Example.COM,DNS:api.example.com,IP:192.0.2.1,email:hostmaster@example.com,DNS:*.Example.com';
const NAMES = ['www.example.com', 'api.example.com', '*.example.com'];

/** CSRs: name → [key, extra `openssl req` arguments]. */
const CSRS: Record<string, [string, ...string[]]> = {
  rsa2048: ['rsa2048', '-sha256'],
  'rsa2048-sha384': ['rsa2048', '-sha384'],
  'rsa2048-sha512': ['rsa2048', '-sha512'],
  'rsa2048-sha1': ['rsa2048', '-sha1'],
  'rsa2048-pss': ['rsa2048', '-sha256', '-sigopt', 'rsa_padding_mode:pss'],
  rsa3072: ['rsa3072', '-sha256'],
  rsaBigE: ['rsaBigE', '-sha256'],
  p256: ['p256', '-sha256'],
  'p256-sha512': ['p256', '-sha512'],
  'p256-sha1': ['p256', '-sha1'],
  p384: ['p384', '-sha384'],
  rsa1024: ['rsa1024', '-sha256'],
  'rsa1024-sha1': ['rsa1024', '-sha1'],
  rsaE3: ['rsaE3', '-sha256'],
  close: ['close', '-sha256'],
  p192: ['p192', '-sha256'],
  p224: ['p224', '-sha256'],
  p521: ['p521', '-sha512'],
  secp256k1: ['secp256k1', '-sha256'],
  brainpool: ['brainpool', '-sha256'],
  explicit: ['explicit', '-sha256'],
  compressed: ['compressed', '-sha256'],
  ed25519: ['ed25519'],
  ed448: ['ed448'],
  rsaPss: ['rsaPss', '-sha256'],
  dsa: ['dsa', '-sha256'],
};

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'certdesk-checks-'));
  openssl('genpkey', '-genparam', '-algorithm', 'DSA', '-pkeyopt', 'dsa_paramgen_bits:2048', '-out', 'dsa.params');
  for (const [name, args] of Object.entries(KEYS)) openssl('genpkey', ...args, '-out', `${name}.key`);
  openssl('ecparam', '-name', 'prime256v1', '-param_enc', 'explicit', '-genkey', '-noout', '-out', 'explicit.key');
  openssl('ec', '-in', 'p256.key', '-conv_form', 'compressed', '-out', 'compressed.key');
  writeFileSync(join(dir, 'close.key'), closePrimesKey());
  for (const [name, [key, ...args]] of Object.entries(CSRS)) {
    openssl('req', '-new', ...args, '-key', `${key}.key`, '-subj', SUBJECT, '-addext', SAN, '-out', `${name}.csr`);
    openssl('req', '-in', `${name}.csr`, '-outform', 'DER', '-out', `${name}.der`);
  }
  openssl('req', '-new', '-sha256', '-key', 'p256.key', '-subj', '/O=No Common Name', '-out', 'nocn.csr');
  openssl('req', '-in', 'nocn.csr', '-outform', 'DER', '-out', 'nocn.der');
  openssl(
    'req',
    '-x509',
    '-new',
    '-key',
    'p256.key',
    '-subj',
    '/CN=cert.example.com',
    '-days',
    '1',
    '-out',
    'cert.pem',
  );
}, 120_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// ---- Test helpers: a tiny DER writer and bigint arithmetic, independent of the code under test ----

function tlv(tag: number, ...parts: Uint8Array[]): Buffer {
  const body = Buffer.concat(parts);
  const n = body.length;
  const length =
    n < 0x80
      ? [n]
      : n < 0x100
        ? [0x81, n]
        : n < 0x10000
          ? [0x82, n >> 8, n & 255]
          : [0x83, n >> 16, (n >> 8) & 255, n & 255];
  return Buffer.concat([Buffer.from([tag, ...length]), body]);
}
const seq = (...parts: Uint8Array[]): Buffer => tlv(0x30, ...parts);
const NULL = Buffer.from([0x05, 0x00]);
const bitString = (bytes: Uint8Array): Buffer => tlv(0x03, Buffer.from([0]), bytes);
function hexOf(v: bigint): string {
  const hex = v.toString(16);
  return hex.length % 2 ? `0${hex}` : hex;
}
function int(v: bigint): Buffer {
  const bytes = Buffer.from(hexOf(v), 'hex');
  return tlv(0x02, bytes[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), bytes]) : bytes);
}
function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split('.').map(Number);
  const out = [a! * 40 + b!];
  for (const arc of rest) {
    const groups = [arc & 0x7f];
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) groups.unshift((v & 0x7f) | 0x80);
    out.push(...groups);
  }
  return tlv(0x06, Buffer.from(out));
}
const RSA_ALG = seq(oid('1.2.840.113549.1.1.1'), NULL);
const rsaSpki = (n: bigint, e = 65537n): Buffer => seq(RSA_ALG, bitString(seq(int(n), int(e))));
const ecSpki = (curve: string, point: Uint8Array): Buffer =>
  seq(seq(oid('1.2.840.10045.2.1'), oid(curve)), bitString(point));

const toBig = (bytes: Uint8Array): bigint => BigInt(`0x${Buffer.from(bytes).toString('hex') || '0'}`);
const b64url = (v: bigint): string => Buffer.from(hexOf(v), 'hex').toString('base64url');
const bitLength = (v: bigint): number => v.toString(2).length;

function sqrtFloor(n: bigint): bigint {
  if (n < 2n) return n;
  let x = 1n << BigInt(Math.ceil(bitLength(n) / 2));
  for (;;) {
    const y = (x + n / x) / 2n;
    if (y >= x) return x;
    x = y;
  }
}
function modInverse(a: bigint, m: bigint): bigint | undefined {
  let [r0, r1, s0, s1] = [a % m, m, 1n, 0n];
  while (r1 !== 0n) {
    const q = r0 / r1;
    [r0, r1, s0, s1] = [r1, r0 - q * r1, s1, s0 - q * s1];
  }
  return r0 === 1n ? ((s0 % m) + m) % m : undefined;
}
function nextPrime(from: bigint): bigint {
  let c = from | 1n;
  while (!checkPrimeSync(c)) c += 2n;
  return c;
}
const prime = (bits: number): bigint => generatePrimeSync(bits, { bigint: true });
const SMALL_PRIMES = Array.from({ length: 998 }, (_, i) => i + 2).filter((p) =>
  Array.from({ length: p - 2 }, (_, j) => j + 2).every((d) => p % d !== 0),
);
/** A random odd modulus of exactly `bits` bits with no prime factor below 1000 (so only size or exponent can fail). */
function randomModulus(bits: number): bigint {
  for (;;) {
    const n =
      (toBig(randomBytes(Math.ceil(bits / 8))) >> BigInt(8 * Math.ceil(bits / 8) - bits)) |
      (1n << BigInt(bits - 1)) |
      1n;
    if (SMALL_PRIMES.every((p) => n % BigInt(p) !== 0n)) return n;
  }
}

/** PKCS#8 PEM of the RSA key with primes p and q (e = 65537), via JWK. */
function rsaKeyPem(p: bigint, q: bigint): string | undefined {
  const e = 65537n;
  const d = modInverse(e, (p - 1n) * (q - 1n));
  const qi = modInverse(q, p);
  if (d === undefined || qi === undefined) return undefined;
  const jwk = {
    kty: 'RSA',
    n: b64url(p * q),
    e: b64url(e),
    d: b64url(d),
    p: b64url(p),
    q: b64url(q),
    dp: b64url(d % (p - 1n)),
    dq: b64url(d % (q - 1n)),
    qi: b64url(qi),
  };
  return createPrivateKey({ key: jwk, format: 'jwk' }).export({ type: 'pkcs8', format: 'pem' }).toString();
}

/** A real, signing RSA-2048 key whose primes are neighbours: q is the next prime after p + 2. */
function closePrimesKey(): string {
  for (;;) {
    const p = prime(1024);
    const q = nextPrime(p + 2n);
    const key = bitLength(p * q) === 2048 ? rsaKeyPem(p, q) : undefined;
    if (key !== undefined) return key;
  }
}

/**
 * n = p·q with Fermat's method succeeding at exactly round `k` (0-based) from ⌈√n⌉:
 * (p+q)/2 − √(pq) ≈ (q−p)²/(8p), so q − p ≈ √(8p(k + ½)).
 */
function fermatModulus(p: bigint, k: number): { n: bigint; rounds: bigint } {
  const q = nextPrime(p + sqrtFloor(4n * BigInt(2 * k + 1) * p));
  const n = p * q;
  let a = sqrtFloor(n);
  if (a * a < n) a += 1n;
  return { n, rounds: (p + q) / 2n - a };
}

/** The CertdeskError `fn` threw; fails on success or any other exception. */
function failure(fn: () => unknown): CertdeskError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(CertdeskError);
    return e as CertdeskError;
  }
  throw new Error('expected a CertdeskError, but the call succeeded');
}
function expectRefused(fn: () => unknown, kind: 'invalidCsr' | 'badKey', message: RegExp): CertdeskError {
  const error = failure(fn);
  expect({ kind: error.kind, field: error.field, message: error.message }).toMatchObject({ kind, field: 'CSR' });
  expect(error.message).toMatch(message);
  return error;
}

/** The three parts of a CertificationRequest, as raw DER, for rebuilding altered requests. */
function csrParts(bytes: Uint8Array): { cri: Buffer; alg: Buffer; sig: Buffer } {
  const [cri, alg, sig] = children(bytes, readTlv(bytes, 0)).map((t) => Buffer.from(bytes.subarray(t.start, t.end)));
  return { cri: cri!, alg: alg!, sig: sig! };
}
function spkiOf(bytes: Uint8Array): Buffer {
  const [cri] = children(bytes, readTlv(bytes, 0));
  const spki = children(bytes, cri!)[2]!;
  return Buffer.from(bytes.subarray(spki.start, spki.end));
}
/** A CSR signed here with node:crypto, for shapes openssl does not emit. */
function signedCsr(cri: Buffer, keyFile: string, hash: string, alg: Buffer): Buffer {
  const key = createPrivateKey(readFileSync(join(dir, keyFile)));
  return seq(cri, alg, bitString(sign(hash, cri, key)));
}
const SHA256_RSA = seq(oid('1.2.840.113549.1.1.11'), NULL);

// ---- Tests ----

describe('checkCsr accepts good requests', () => {
  const cases: [string, Partial<CheckedKey>][] = [
    ['rsa2048', { type: 'rsa', bits: 2048 }],
    ['rsa2048-sha384', { type: 'rsa', bits: 2048 }],
    ['rsa2048-sha512', { type: 'rsa', bits: 2048 }],
    ['rsa3072', { type: 'rsa', bits: 3072 }],
    ['rsaBigE', { type: 'rsa', bits: 2048 }],
    ['p256', { type: 'ecdsa', bits: 256, curve: 'P-256' }],
    ['p256-sha512', { type: 'ecdsa', bits: 256, curve: 'P-256' }],
    ['p384', { type: 'ecdsa', bits: 384, curve: 'P-384' }],
  ];

  it.each(cases)('ok/%s as PEM and as DER', (name, expected) => {
    for (const input of [pem(name), der(name), new Uint8Array(der(name))]) {
      const csr = checkCsr(input);
      expect(csr.key).toMatchObject(expected);
      if (expected.type === 'rsa') expect(csr.key).not.toHaveProperty('curve');
      expect(csr.commonName).toBe('Www.Example.com');
      expect(csr.dnsNames).toEqual(NAMES);
      expect(Buffer.from(csr.der).equals(der(name))).toBe(true);

      // The SPKI exactly as in the request, i.e. as openssl prints it.
      const pubkey = openssl('req', '-in', `${name}.csr`, '-noout', '-pubkey').toString();
      expect(Buffer.from(csr.key.spki).toString('base64')).toBe(pubkey.replace(/-----[^-]+-----|\s/g, ''));
      expect(Buffer.from(csr.key.spki).equals(spkiOf(der(name)))).toBe(true);

      // keyId = SHA-1 of the BIT STRING's value, which is the RSAPublicKey or the EC point.
      const key = createPublicKey({ key: Buffer.from(csr.key.spki), format: 'der', type: 'spki' });
      let value: Buffer;
      if (expected.type === 'rsa') {
        value = key.export({ type: 'pkcs1', format: 'der' });
      } else {
        const jwk = key.export({ format: 'jwk' });
        value = Buffer.concat([Buffer.from([4]), Buffer.from(jwk.x!, 'base64url'), Buffer.from(jwk.y!, 'base64url')]);
      }
      expect(Buffer.from(csr.key.keyId).toString('hex')).toBe(createHash('sha1').update(value).digest('hex'));
    }
  });

  it.each(['rsa2048', 'p384'])('ok/%s: keyId equals the subjectKeyIdentifier openssl computes', (name) => {
    openssl(
      'req',
      '-x509',
      '-new',
      '-key',
      `${name}.key`,
      '-subj',
      '/CN=ski.example.com',
      '-days',
      '1',
      '-addext',
      'subjectKeyIdentifier=hash',
      '-out',
      `ski-${name}.pem`,
    );
    const ski = openssl('x509', '-in', `ski-${name}.pem`, '-noout', '-ext', 'subjectKeyIdentifier').toString();
    const expected = /Identifier: *\n\s*([0-9A-F:]+)/.exec(ski)?.[1]?.replace(/:/g, '').toLowerCase();
    expect(expected).toMatch(/^[0-9a-f]{40}$/);
    expect(Buffer.from(checkCsr(pem(name)).key.keyId).toString('hex')).toBe(expected);
  });

  it('ok/no-names: commonName is empty and dnsNames empty when the request has neither', () => {
    const csr = checkCsr(pem('nocn'));
    expect(csr.commonName).toBe('');
    expect(csr.dnsNames).toEqual([]);
  });

  const variants: [string, () => string | Uint8Array][] = [
    ['crlf', () => pem('p256').replace(/\n/g, '\r\n')],
    ['surrounding-whitespace', () => `\n \t${pem('p256')}\n\n`],
    ['new-certificate-request-label', () => toPem(der('p256'), 'NEW CERTIFICATE REQUEST')],
    ['bare-base64', () => der('p256').toString('base64')],
    [
      'buffer-view-with-offset',
      () =>
        new Uint8Array(Buffer.concat([Buffer.from('xx'), der('p256'), Buffer.from('yy')])).subarray(
          2,
          2 + der('p256').length,
        ),
    ],
  ];
  it.each(variants)('ok/encoding %s', (_id, input) => {
    expect(Buffer.from(checkCsr(input()).der).equals(der('p256'))).toBe(true);
  });

  it('ok/no-attributes: a request without the (optional in practice) attributes field', () => {
    const { cri } = csrParts(der('rsa2048'));
    const [version, subject, spki] = children(cri, readTlv(cri, 0)).map((t) => cri.subarray(t.start, t.end));
    const csr = checkCsr(signedCsr(seq(version!, subject!, spki!), 'rsa2048.key', 'sha256', SHA256_RSA));
    expect(csr).toMatchObject({ commonName: 'Www.Example.com', dnsNames: [] });
  });

  it('ok/immutable: the result is frozen and owns its bytes', () => {
    const input = Buffer.from(der('rsa2048'));
    const csr: CheckedCsr = checkCsr(input);
    input.fill(0);
    expect(Buffer.from(csr.der).equals(der('rsa2048'))).toBe(true);
    expect(Buffer.from(csr.key.spki).equals(spkiOf(der('rsa2048')))).toBe(true);
    expect(csr.key.spki.buffer).not.toBe(csr.der.buffer);
    expect(Object.isFrozen(csr)).toBe(true);
    expect(Object.isFrozen(csr.key)).toBe(true);
    expect(Object.isFrozen(csr.dnsNames)).toBe(true);
  });
});

describe('checkCsr refuses weak or uncertified keys with badKey', () => {
  const cases: [string, RegExp][] = [
    ['rsa1024', /^RSA key of 1024 bits: at least 2048 are required/],
    ['rsaE3', /^RSA public exponent 3 is not allowed: .*use 65537/],
    ['close', /^RSA key is factorable \(Fermat\): its primes are too close/],
    ['p192', /^ECDSA key on curve P-192 is not certified; use P-256 or P-384/],
    ['p224', /^ECDSA key on curve P-224 is not certified/],
    ['p521', /^ECDSA key on curve P-521 is not certified/],
    ['secp256k1', /^ECDSA key on curve secp256k1 is not certified/],
    ['brainpool', /^ECDSA key on curve brainpoolP256r1 is not certified/],
    ['explicit', /^ECDSA key with explicit or implicit curve parameters is not certified/],
    ['compressed', /^ECDSA P-256 key with a compressed point is not accepted/],
    ['ed25519', /^Key type Ed25519 is not certified; use RSA \(2048 bits or more\) or ECDSA P-256\/P-384/],
    ['ed448', /^Key type Ed448 is not certified; use RSA/],
    ['rsaPss', /^Key type RSASSA-PSS is not certified; use RSA/],
    ['dsa', /^Key type DSA is not certified; use RSA/],
  ];
  it.each(cases)('bad/%s', (name, message) => {
    expectRefused(() => checkCsr(pem(name)), 'badKey', message);
    expectRefused(() => checkCsr(der(name)), 'badKey', message);
  });

  it('bad/order: key checks come before the signature algorithm and the signature', () => {
    // A 1024-bit key signing with SHA-1: the key is the problem reported.
    expectRefused(() => checkCsr(pem('rsa1024-sha1')), 'badKey', /1024 bits/);
    // A weak key in a request whose signature was damaged.
    const tampered = Buffer.from(der('rsa1024'));
    tampered[tampered.length - 3]! ^= 0x01;
    expectRefused(() => checkCsr(tampered), 'badKey', /1024 bits/);
    // An EC point moved off the curve inside a request: badKey, not "signature does not verify".
    const moved = Buffer.from(der('p256'));
    const point = moved.indexOf(spkiOf(moved)) + spkiOf(moved).length - 1;
    moved[point]! ^= 0x01;
    expectRefused(() => checkCsr(moved), 'badKey', /^ECDSA P-256 public key is not a valid point on the curve/);
  });
});

describe('checkCsr refuses unusable requests with invalidCsr', () => {
  const cases: [string, () => string | Uint8Array, RegExp][] = [
    ['empty-string', () => '', /^The CSR is empty/],
    ['whitespace', () => ' \n\t ', /^The CSR is empty/],
    ['empty-bytes', () => new Uint8Array(0), /^The CSR is empty/],
    [
      'hello',
      () => 'hello',
      /^The CSR could not be parsed: it is neither PEM nor valid base64 \(misplaced padding or wrong length\)/,
    ],
    ['random-bytes', () => randomBytes(300), /^The CSR could not be parsed/],
    ['random-base64', () => randomBytes(300).toString('base64'), /^The CSR could not be parsed/],
    [
      'certificate-pem',
      () => readFileSync(join(dir, 'cert.pem'), 'utf8'),
      /^The CSR could not be parsed: the PEM block is a "CERTIFICATE", not/,
    ],
    [
      'private-key-pem',
      () => readFileSync(join(dir, 'p256.key'), 'utf8'),
      /"PRIVATE KEY", not a "CERTIFICATE REQUEST"/,
    ],
    [
      'certificate-der',
      () => Buffer.from(readFileSync(join(dir, 'cert.pem'), 'utf8').replace(/-----[^-]+-----|\s/g, ''), 'base64'),
      /^The CSR could not be parsed: it is not a PKCS#10/,
    ],
    [
      'trailing-bytes',
      () => Buffer.concat([der('p256'), Buffer.from([0, 0, 0])]),
      /^The CSR could not be parsed: it has 3 bytes of trailing data/,
    ],
    [
      'trailing-bytes-pem',
      () => toPem(Buffer.concat([der('p256'), Buffer.from([0x30, 0x00])])),
      /2 bytes of trailing data/,
    ],
    ['trailing-text-after-pem', () => `${pem('p256')}garbage`, /^The CSR could not be parsed: there is text after/],
    ['truncated', () => der('rsa2048').subarray(0, 300), /^The CSR could not be parsed: its DER encoding is truncated/],
    [
      'truncated-pem',
      () => toPem(der('p256').subarray(0, der('p256').length - 1)),
      /^The CSR could not be parsed: its DER encoding is truncated/,
    ],
    [
      'no-end-line',
      () => pem('p256').replace(/-----END[^\n]*\n?/, ''),
      /^The CSR could not be parsed: it has no "-----END CERTIFICATE REQUEST-----" line; it seems truncated/,
    ],
    [
      'bad-base64',
      () => pem('p256').replace(/\n(.)/, '\n!$1'),
      /^The CSR could not be parsed: it is neither PEM nor valid base64 \(invalid character "!"\)/,
    ],
    ['too-large', () => `${pem('p256')}${' '.repeat(64 * 1024)}`, /larger than 64 KiB/],
    ['not-a-string', () => 42 as unknown as string, /DER bytes or PEM text/],
    [
      'sha1-rsa',
      () => pem('rsa2048-sha1'),
      /^The CSR is signed with sha1WithRSAEncryption: SHA-1 signatures are not accepted/,
    ],
    [
      'sha1-ecdsa',
      () => pem('p256-sha1'),
      /^The CSR is signed with ecdsa-with-SHA1: SHA-1 signatures are not accepted/,
    ],
    ['rsassa-pss-signature', () => pem('rsa2048-pss'), /^The CSR is signed with RSASSA-PSS, which is not accepted/],
  ];
  it.each(cases)('fail/%s', (_id, input, message) => {
    expectRefused(() => checkCsr(input()), 'invalidCsr', message);
  });

  const SIGNATURE = /^The CSR signature does not verify: the request was altered/;

  it.each(['rsa2048', 'p256', 'p384'])(
    'fail/tampered-signature (%s): one bit flipped in the signature value',
    (name) => {
      const bytes = Buffer.from(der(name));
      const { sig } = csrParts(bytes);
      // The middle of the signature value: for ECDSA inside r or s, so the DER stays well-formed.
      bytes[bytes.length - Math.floor(sig.length / 2)]! ^= 0x01;
      expectRefused(() => checkCsr(bytes), 'invalidCsr', SIGNATURE);
      expectRefused(() => checkCsr(toPem(bytes)), 'invalidCsr', SIGNATURE);
    },
  );

  it.each(['rsa2048', 'p256'])('fail/tampered-subject (%s): one byte of the CN changed', (name) => {
    const bytes = Buffer.from(der(name));
    const at = bytes.indexOf('Www.Example.com');
    expect(at).toBeGreaterThan(0);
    bytes[at] = 'V'.charCodeAt(0);
    expectRefused(() => checkCsr(bytes), 'invalidCsr', SIGNATURE);
  });

  it('fail/tampered-san: a dNSName changed', () => {
    const bytes = Buffer.from(der('p256'));
    bytes[bytes.indexOf('api.example.com')] = 'x'.charCodeAt(0);
    expectRefused(() => checkCsr(bytes), 'invalidCsr', SIGNATURE);
  });

  it('fail/transplanted-signature: a genuine signature by the same key over another request', () => {
    openssl(
      'req',
      '-new',
      '-sha256',
      '-key',
      'rsa2048.key',
      '-subj',
      '/CN=other.example.com',
      '-outform',
      'DER',
      '-out',
      'other.der',
    );
    const mine = csrParts(der('rsa2048'));
    const other = csrParts(der('other'));
    expectRefused(() => checkCsr(seq(mine.cri, other.alg, other.sig)), 'invalidCsr', SIGNATURE);
  });

  it('fail/signature-algorithm: changed, mismatched, unknown or with bad parameters', () => {
    const { cri, sig } = csrParts(der('rsa2048'));
    const rsaWith = (alg: Buffer): Buffer => seq(cri, alg, sig);
    expectRefused(() => checkCsr(rsaWith(seq(oid('1.2.840.113549.1.1.12'), NULL))), 'invalidCsr', SIGNATURE);
    expectRefused(
      () => checkCsr(rsaWith(seq(oid('1.2.840.10045.4.3.2')))),
      'invalidCsr',
      /ecdsa-with-SHA256 does not match its RSA key/,
    );
    expectRefused(
      () => checkCsr(rsaWith(seq(oid('1.2.840.113549.1.1.4'), NULL))),
      'invalidCsr',
      /md5WithRSAEncryption, which is not accepted/,
    );
    expectRefused(() => checkCsr(rsaWith(seq(oid('1.2.3.4')))), 'invalidCsr', /1\.2\.3\.4, which is not accepted/);
    expectRefused(
      () => checkCsr(rsaWith(seq(oid('1.2.840.113549.1.1.11'), int(0n)))),
      'invalidCsr',
      /could not be parsed/,
    );
    // Without the NULL (tolerated): the signature still verifies.
    expect(checkCsr(rsaWith(seq(oid('1.2.840.113549.1.1.11')))).key.bits).toBe(2048);
  });

  it('fail/structure: version 2, four top-level parts, unused bits in the signature', () => {
    const { cri, alg, sig } = csrParts(der('p256'));
    const v2 = Buffer.from(cri);
    v2[v2.indexOf(Buffer.from([0x02, 0x01, 0x00]))! + 2] = 1;
    expectRefused(() => checkCsr(seq(v2, alg, sig)), 'invalidCsr', /not a PKCS#10/);
    expectRefused(() => checkCsr(seq(cri, alg, sig, NULL)), 'invalidCsr', /not a PKCS#10/);
    const unused = Buffer.from(sig);
    unused[unused.indexOf(0x00, 1)] = 1;
    expectRefused(() => checkCsr(seq(cri, alg, unused)), 'invalidCsr', /could not be parsed/);
  });
});

describe('checkPublicKey', () => {
  it('returns the same CheckedKey as checkCsr for good keys', () => {
    for (const name of ['rsa2048', 'rsa3072', 'p256', 'p384']) {
      const spki = spkiOf(der(name));
      const key = checkPublicKey(spki);
      expect(key).toEqual(checkCsr(der(name)).key);
      expect(Buffer.from(key.spki).equals(spki)).toBe(true);
      expect(Object.isFrozen(key)).toBe(true);
    }
  });

  describe('RSA sizes and exponents (hand-built keys)', () => {
    const ok: [string, () => Buffer, number][] = [
      ['ok/4096-bits', () => rsaSpki(randomModulus(4096)), 4096],
      ['ok/8192-bits', () => rsaSpki(randomModulus(8192)), 8192],
      ['ok/exponent-2^256-1', () => rsaSpki(randomModulus(2048), (1n << 256n) - 1n), 2048],
      ['ok/exponent-65539', () => rsaSpki(randomModulus(2048), 65539n), 2048],
      ['ok/exponent-2^64-1-with-4096-bits', () => rsaSpki(randomModulus(4096), (1n << 64n) - 1n), 4096],
    ];
    it.each(ok)('%s', (_id, spki, bits) => {
      expect(checkPublicKey(spki())).toMatchObject({ type: 'rsa', bits });
    });

    const bad: [string, () => Buffer, RegExp][] = [
      ['1024-bits', () => rsaSpki(randomModulus(1024)), /^RSA key of 1024 bits: at least 2048 are required/],
      ['2047-bits', () => rsaSpki(randomModulus(2047)), /^RSA key of 2047 bits: at least 2048/],
      [
        '2052-bits',
        () => rsaSpki(randomModulus(2052)),
        /^RSA key of 2052 bits: the modulus length must be a multiple of 8/,
      ],
      ['8200-bits', () => rsaSpki(randomModulus(8200)), /^RSA key of 8200 bits: at most 8192 are accepted/],
      [
        'exponent-3',
        () => rsaSpki(randomModulus(2048), 3n),
        /^RSA public exponent 3 is not allowed: it is below 65537; use 65537/,
      ],
      [
        'exponent-1',
        () => rsaSpki(randomModulus(2048), 1n),
        /^RSA public exponent 1 is not allowed: it is below 65537/,
      ],
      [
        'exponent-65535',
        () => rsaSpki(randomModulus(2048), 65535n),
        /^RSA public exponent 65535 is not allowed: it is below 65537/,
      ],
      [
        'exponent-even',
        () => rsaSpki(randomModulus(2048), 65538n),
        /^RSA public exponent 65538 is not allowed: it is even/,
      ],
      [
        'exponent-2^256+1',
        () => rsaSpki(randomModulus(2048), (1n << 256n) + 1n),
        /^RSA public exponent of 257 bits is not allowed: it exceeds 2\^256/,
      ],
      [
        'exponent-2^64+1-with-4096-bits',
        () => rsaSpki(randomModulus(4096), (1n << 64n) + 1n),
        /^RSA public exponent of 65 bits is not supported with a 4096-bit modulus/,
      ],
      [
        'exponent-huge',
        () => rsaSpki(randomModulus(2048), (1n << 2000n) + 1n),
        /^RSA public exponent of \d+ bits is not allowed: it exceeds 2\^256/,
      ],
      [
        'params-absent',
        () => seq(seq(oid('1.2.840.113549.1.1.1')), bitString(seq(int(randomModulus(2048)), int(65537n)))),
        /parameters other than NULL/,
      ],
      [
        'negative-modulus',
        () => seq(RSA_ALG, bitString(seq(tlv(0x02, Buffer.alloc(256, 0xff)), int(65537n)))),
        /^The RSA public key could not be parsed/,
      ],
      [
        'non-minimal-modulus',
        () =>
          seq(
            RSA_ALG,
            bitString(seq(tlv(0x02, Buffer.concat([Buffer.from([0, 0x7f]), randomBytes(255)])), int(65537n))),
          ),
        /^The RSA public key could not be parsed/,
      ],
      [
        'rsa-key-trailing-bytes',
        () => seq(RSA_ALG, bitString(Buffer.concat([seq(int(randomModulus(2048)), int(65537n)), Buffer.from([0])]))),
        /^The RSA public key could not be parsed/,
      ],
    ];
    it.each(bad)('bad/%s', (_id, spki, message) => {
      expectRefused(() => checkPublicKey(spki()), 'badKey', message);
    });
  });

  describe('RSA small factors and Fermat (hand-built moduli)', () => {
    let m = 0n;
    let p = 0n;
    beforeAll(() => {
      m = prime(2038);
      p = prime(1024);
    }, 60_000);

    it('bad/small-factor-3: n = 3 · (random odd number), exactly 2048 bits', () => {
      let n = randomModulus(2048);
      n -= n % 3n;
      if (n % 2n === 0n) n -= 3n;
      expect(bitLength(n)).toBe(2048);
      expectRefused(() => checkPublicKey(rsaSpki(n)), 'badKey', /^RSA modulus has a small factor \(3\)/);
    });

    it('bad/even-modulus: small factor 2', () => {
      expectRefused(
        () => checkPublicKey(rsaSpki(randomModulus(2048) - 1n)),
        'badKey',
        /^RSA modulus has a small factor \(2\)/,
      );
    });

    it('bad/small-factor-997 (the largest prime below 1000), ok/factor-1009 (the smallest above)', () => {
      expect(bitLength(997n * m)).toBe(2048);
      expectRefused(() => checkPublicKey(rsaSpki(997n * m)), 'badKey', /^RSA modulus has a small factor \(997\)/);
      expect(bitLength(1009n * m)).toBe(2048);
      expect(checkPublicKey(rsaSpki(1009n * m)).bits).toBe(2048);
    });

    it('bad/square-modulus: n = p², Fermat in round 0', () => {
      expect(bitLength(p * p)).toBe(2048);
      expectRefused(() => checkPublicKey(rsaSpki(p * p)), 'badKey', /factorable \(Fermat\)/);
    });

    it('bad/fermat-round-99 is the last round tried; ok/fermat-round-100 is beyond the bound', () => {
      const last = fermatModulus(p, 99);
      expect(last.rounds).toBe(99n);
      expect(bitLength(last.n)).toBe(2048);
      expectRefused(
        () => checkPublicKey(rsaSpki(last.n)),
        'badKey',
        /^RSA key is factorable \(Fermat\): its primes are too close/,
      );
      const beyond = fermatModulus(p, 100);
      expect(beyond.rounds).toBe(100n);
      expect(checkPublicKey(rsaSpki(beyond.n)).bits).toBe(2048);
    });

    it('bad/close-primes: the real key of the close fixture, checked directly', () => {
      expectRefused(() => checkPublicKey(spkiOf(der('close'))), 'badKey', /Fermat/);
    });
  });

  describe('EC points and other key types (hand-built keys)', () => {
    const P256 = '1.2.840.10045.3.1.7';
    const p256Point = (): Buffer => {
      const spki = spkiOf(der('p256'));
      return Buffer.from(spki.subarray(spki.length - 65));
    };
    const bad: [string, () => Uint8Array, RegExp][] = [
      [
        'point-off-curve',
        () => {
          const q = p256Point();
          q[64]! ^= 1;
          return ecSpki(P256, q);
        },
        /^ECDSA P-256 public key is not a valid point on the curve/,
      ],
      [
        'point-x-not-below-p',
        () => {
          const q = p256Point();
          q.fill(0xff, 1, 33);
          return ecSpki(P256, q);
        },
        /not a valid point/,
      ],
      ['point-at-infinity', () => ecSpki(P256, Buffer.from([0])), /not a valid point/],
      [
        'point-hybrid-form',
        () => {
          const q = p256Point();
          q[0] = 6;
          return ecSpki(P256, q);
        },
        /not a valid point/,
      ],
      ['point-too-short', () => ecSpki(P256, p256Point().subarray(0, 64)), /not a valid point/],
      [
        'point-of-p256-labelled-p384',
        () => ecSpki('1.3.132.0.34', p256Point()),
        /^ECDSA P-384 public key is not a valid point/,
      ],
      ['curve-unknown', () => ecSpki('1.2.3.4.5', p256Point()), /^ECDSA key on curve 1\.2\.3\.4\.5 is not certified/],
      [
        'curve-implicit-null',
        () => seq(seq(oid('1.2.840.10045.2.1'), NULL), bitString(p256Point())),
        /explicit or implicit curve parameters/,
      ],
      [
        'curve-absent',
        () => seq(seq(oid('1.2.840.10045.2.1')), bitString(p256Point())),
        /explicit or implicit curve parameters/,
      ],
      [
        'x25519',
        () => generateKeyPairSync('x25519').publicKey.export({ type: 'spki', format: 'der' }),
        /^Key type X25519 is not certified/,
      ],
      [
        'ed25519',
        () => generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'der' }),
        /^Key type Ed25519 is not certified/,
      ],
      [
        'unknown-algorithm',
        () => seq(seq(oid('1.2.3.4')), bitString(Buffer.from('key'))),
        /^Key type with OID 1\.2\.3\.4 is not certified; use RSA/,
      ],
      ['empty', () => new Uint8Array(0), /^The public key could not be parsed/],
      ['garbage', () => randomBytes(91), /^The public key could not be parsed/],
      [
        'trailing-byte',
        () => Buffer.concat([spkiOf(der('p256')), Buffer.from([0])]),
        /^The public key could not be parsed/,
      ],
      [
        'bit-string-unused-bits',
        () => {
          const s = Buffer.from(spkiOf(der('p256')));
          s[s.length - 66] = 1;
          return s;
        },
        /^The public key could not be parsed/,
      ],
      ['not-a-buffer', () => 'spki' as unknown as Uint8Array, /^The public key could not be parsed/],
    ];
    it.each(bad)('bad/%s', (_id, spki, message) => {
      expectRefused(() => checkPublicKey(spki()), 'badKey', message);
    });
  });
});

describe('robustness', () => {
  /** mulberry32: a seeded PRNG, so a failing mutation can be replayed. */
  function prng(seed: number): () => number {
    let a = seed;
    return () => {
      a = (a + 0x6d2b79f5) | 0;
      let t = Math.imul(a ^ (a >>> 15), 1 | a);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }
  function mutate(input: Uint8Array, rand: () => number): Uint8Array {
    const bytes = Buffer.from(input);
    const at = Math.floor(rand() * bytes.length);
    switch (Math.floor(rand() * 6)) {
      case 0:
        bytes[at]! ^= 1 << Math.floor(rand() * 8);
        return bytes;
      case 1:
        for (let i = 0; i < 4; i++) bytes[Math.floor(rand() * bytes.length)] = Math.floor(rand() * 256);
        return bytes;
      case 2:
        return bytes.subarray(0, at);
      case 3:
        return Buffer.concat([bytes.subarray(0, at), Buffer.from([Math.floor(rand() * 256)]), bytes.subarray(at)]);
      case 4:
        return Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + 1 + Math.floor(rand() * 8))]);
      default:
        // Length bytes are the interesting ones: set one of the first few to an extreme.
        bytes[Math.floor(rand() * 12)] = [0x00, 0x7f, 0x80, 0x81, 0x84, 0xff][Math.floor(rand() * 6)]!;
        return bytes;
    }
  }

  it('fuzz: 1,000 mutated CSRs each give a CheckedCsr or an invalidCsr/badKey CertdeskError', () => {
    const rand = prng(20240611);
    const outcomes: Record<string, number> = {};
    for (let i = 0; i < 1000; i++) {
      const source = der(['rsa2048', 'p256', 'p384', 'rsa2048-sha512'][i % 4]!);
      const input = mutate(source, rand);
      let outcome: string;
      try {
        checkCsr(input);
        outcome = 'ok';
      } catch (e) {
        if (!(e instanceof CertdeskError) || (e.kind !== 'invalidCsr' && e.kind !== 'badKey')) {
          throw new Error(`mutation ${i} (${Buffer.from(input).toString('base64')}) threw ${String(e)}`);
        }
        outcome = e.kind;
      }
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    }
    expect(outcomes.invalidCsr).toBeGreaterThan(500);
    expect((outcomes.invalidCsr ?? 0) + (outcomes.badKey ?? 0) + (outcomes.ok ?? 0)).toBe(1000);
  });

  it('fuzz: 500 mutated SPKIs each give a CheckedKey or a badKey CertdeskError', () => {
    const rand = prng(7);
    for (let i = 0; i < 500; i++) {
      const input = mutate(spkiOf(der(i % 2 ? 'rsa2048' : 'p256')), rand);
      try {
        checkPublicKey(input);
      } catch (e) {
        if (!(e instanceof CertdeskError) || e.kind !== 'badKey') throw new Error(`mutation ${i} threw ${String(e)}`);
      }
    }
  });

  it('cost: checkPublicKey stays cheap (generous bounds: a shared CI machine)', () => {
    const time = (spki: Uint8Array, rounds: number): number => {
      const start = process.hrtime.bigint();
      for (let i = 0; i < rounds; i++) checkPublicKey(spki);
      return Number(process.hrtime.bigint() - start) / 1000 / rounds;
    };
    const rsa = spkiOf(der('rsa2048'));
    const ec = spkiOf(der('p256'));
    time(rsa, 20);
    time(ec, 20);
    expect(time(rsa, 200)).toBeLessThan(2000);
    expect(time(ec, 200)).toBeLessThan(1000);
  });
});
