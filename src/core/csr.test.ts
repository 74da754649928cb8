import { execFileSync } from 'node:child_process';
import { createPrivateKey, sign } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { children, readTlv, type Tlv } from './der.js';
import { CertdeskError } from './errors.js';
import { MAX_CSR_SIZE, readCsr, type CsrRequest } from './csr.js';
import { isVerifiedCsr, verifyCsr } from './csr-verify.js';

// The one PKCS#10 reader (readCsr + verifyCsr): limits, strictness, what it hands on, and fuzzing.
// Field-by-field reading is tested through its callers (src/validation/csr.test.ts, src/ca/checks.test.ts).

let dir = '';
const openssl = (...args: string[]): Buffer =>
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
const der = (name: string): Buffer => fs.readFileSync(path.join(dir, `${name}.der`));
const toPem = (bytes: Uint8Array): string =>
  `-----BEGIN CERTIFICATE REQUEST-----\n${Buffer.from(bytes)
    .toString('base64')
    .replace(/.{1,64}/g, '$&\n')}-----END CERTIFICATE REQUEST-----\n`;

const KEYS: Record<string, string[]> = {
  rsa: ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048'],
  p256: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256'],
  p384: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-384'],
  p521: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-521'],
  p192: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-192'],
  ed25519: ['-algorithm', 'ED25519'],
};
const SAN = 'subjectAltName=DNS:www.example.org,DNS:Shop.Example.org,IP:192.0.2.7,IP:2001:db8::1,email:sec@example.org';

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'certdesk-core-csr-'));
  for (const [name, args] of Object.entries(KEYS)) {
    openssl('genpkey', ...args, '-out', `${name}.key`);
    openssl(
      'req',
      '-new',
      '-key',
      `${name}.key`,
      '-subj',
      '/CN=www.example.org/O=Example/C=DE',
      '-addext',
      SAN,
      '-outform',
      'DER',
      '-out',
      `${name}.der`,
    );
  }
}, 60_000);

afterAll(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

// ---- A tiny DER writer, independent of the code under test ----
function tlv(tag: number, ...parts: Uint8Array[]): Buffer {
  const body = Buffer.concat(parts);
  const n = body.length;
  const length = n < 0x80 ? [n] : n < 0x100 ? [0x81, n] : [0x82, n >> 8, n & 255];
  return Buffer.concat([Buffer.from([tag, ...length]), body]);
}
const seq = (...parts: Uint8Array[]): Buffer => tlv(0x30, ...parts);
const slice = (bytes: Uint8Array, t: Tlv): Buffer => Buffer.from(bytes.subarray(t.start, t.end));

/** The request `name` with its CertificationRequestInfo replaced by `cri` and signed again with SHA-256. */
function resigned(name: string, cri: Buffer): Buffer {
  const [, alg] = children(der(name), readTlv(der(name), 0)).map((t) => slice(der(name), t));
  const key = createPrivateKey(fs.readFileSync(path.join(dir, `${name}.key`)));
  return seq(cri, alg!, tlv(0x03, Buffer.from([0]), sign(name === 'ed25519' ? null : 'sha256', cri, key)));
}
/** The parts of the CertificationRequestInfo of `name`. */
function criParts(name: string): Buffer[] {
  const bytes = der(name);
  const [cri] = children(bytes, readTlv(bytes, 0));
  return children(bytes, cri!).map((t) => slice(bytes, t));
}

function refusal(fn: () => unknown): CertdeskError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(CertdeskError);
    return e as CertdeskError;
  }
  throw new Error('the input was accepted');
}

describe('readCsr', () => {
  it('ok/one size limit: 64 KiB of text or of DER, refused before any parsing', () => {
    expect(MAX_CSR_SIZE).toBe(64 * 1024);
    const big = Buffer.alloc(MAX_CSR_SIZE + 1, 0x30);
    expect(refusal(() => readCsr(big)).message).toBe('The CSR is larger than 64 KiB.');
    expect(refusal(() => readCsr(`${toPem(der('rsa'))}${' '.repeat(MAX_CSR_SIZE)}`)).message).toBe(
      'The CSR is larger than 64 KiB.',
    );
  });

  it('ok/keeps a private copy of DER input; the result and its lists are frozen; the SPKI lies inside the hashed bytes', () => {
    const input = Buffer.from(der('p256'));
    const request = readCsr(input);
    input.fill(0);
    expect(Buffer.from(request.der).equals(der('p256'))).toBe(true);
    expect(Object.isFrozen(request) && Object.isFrozen(request.dnsNames) && Object.isFrozen(request.publicKey)).toBe(
      true,
    );
    expect(request.spkiDer.buffer).toBe(request.der.buffer);
    expect(request).toMatchObject({
      commonName: 'www.example.org',
      organization: 'Example',
      country: 'DE',
      email: 'sec@example.org',
      dnsNames: ['www.example.org', 'shop.example.org'],
      emails: ['sec@example.org'],
      ipAddresses: ['192.0.2.7', '2001:db8::1'],
    });
  });

  // Each of these was read by one of the two former readers and refused by the other.
  it.each([
    [
      'fail/subject-attribute-with-three-members',
      (p: Buffer[]) => [
        p[0]!,
        seq(tlv(0x31, seq(tlv(0x06, Buffer.from([0x55, 0x04, 0x03])), tlv(0x0c, Buffer.from('x')), tlv(0x05)))),
        p[2]!,
        p[3]!,
      ],
      /fields do not decode/,
    ],
    ['fail/certification-request-info-with-five-members', (p: Buffer[]) => [...p, tlv(0x05)], /not a PKCS#10/],
    [
      'fail/ip-address-of-five-bytes',
      (p: Buffer[]) => [p[0]!, p[1]!, p[2]!, sanAttribute(tlv(0x87, Buffer.from([1, 2, 3, 4, 5])))],
      /fields do not decode/,
    ],
  ])('%s is refused, though well signed', (_id, change, message) => {
    const request = resigned('p256', seq(...change(criParts('p256'))));
    expect(refusal(() => readCsr(request))).toMatchObject({
      kind: 'invalidCsr',
      field: 'CSR',
      message: expect.stringMatching(message),
    });
  });
});

/** An attributes field [0] holding an extensionRequest with one subjectAltName of `names`. */
function sanAttribute(...names: Buffer[]): Buffer {
  const san = seq(tlv(0x06, Buffer.from('551d11', 'hex')), tlv(0x04, seq(...names)));
  return tlv(0xa0, seq(tlv(0x06, Buffer.from('2a864886f70d01090e', 'hex')), tlv(0x31, seq(san))));
}

describe('verifyCsr', () => {
  it.each([
    ['rsa', { keyAlgorithm: 'RSA', keyLength: 2048, signatureAlgorithm: 'sha256WithRSAEncryption' }],
    ['p256', { keyAlgorithm: 'ECC', keyLength: 256, curve: 'P-256', signatureAlgorithm: 'ecdsa-with-SHA256' }],
    ['p384', { keyAlgorithm: 'ECC', keyLength: 384, curve: 'P-384' }],
    ['p521', { keyAlgorithm: 'ECC', keyLength: 521, curve: 'P-521' }],
    ['p192', { keyAlgorithm: 'ECC', keyLength: 192, curve: 'P-192' }],
    ['ed25519', { keyAlgorithm: 'Ed25519', keyLength: 256, signatureAlgorithm: 'ED25519' }],
  ])('ok/%s: verified and described (JWK and SPKI key loading agree)', (name, expected) => {
    expect(verifyCsr(readCsr(der(name)))).toMatchObject(expected);
  });

  it('ok/only its own results count as verified: not a copy, not an unverified read', () => {
    const verified = verifyCsr(readCsr(der('p256')));
    expect(isVerifiedCsr(verified)).toBe(true);
    expect(isVerifiedCsr({ ...verified })).toBe(false);
    expect(isVerifiedCsr(readCsr(der('p256')))).toBe(false);
    expect(isVerifiedCsr(null)).toBe(false);
  });

  it('ok/an imitation of a read request is read again from its bytes: its other members are not believed', () => {
    const forged = {
      ...readCsr(der('p256')),
      commonName: 'evil.example',
      dnsNames: ['evil.example'],
      spkiDer: readCsr(der('rsa')).spkiDer,
    };
    expect(verifyCsr(forged)).toMatchObject({
      commonName: 'www.example.org',
      dnsNames: ['www.example.org', 'shop.example.org'],
      keyAlgorithm: 'ECC',
    });
    expect(refusal(() => verifyCsr({ ...readCsr(der('p256')), der: Buffer.from('garbage') })).kind).toBe('invalidCsr');
  });

  it('fail/a signature over other bytes', () => {
    const request = resigned('rsa', seq(...criParts('rsa')));
    const other = Buffer.from(request);
    other[other.indexOf('www.example.org')] = 'v'.charCodeAt(0);
    expect(refusal(() => verifyCsr(readCsr(other))).message).toMatch(/^The CSR signature does not verify/);
  });
});

/** mulberry32: a seeded PRNG, so a failing case can be replayed. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Every TLV of a DER tree that decodes, outermost first (for mutations that hit headers). */
function tlvs(bytes: Uint8Array, t: Tlv = readTlv(bytes, 0), out: Tlv[] = []): Tlv[] {
  out.push(t);
  if (t.tag & 0x20) {
    try {
      for (const c of children(bytes, t)) tlvs(bytes, c, out);
    } catch {
      // A primitive-looking constructed value: its header is enough.
    }
  }
  return out;
}

function mutate(input: Buffer, rand: () => number): Buffer {
  const bytes = Buffer.from(input);
  const at = Math.floor(rand() * bytes.length);
  const nodes = tlvs(bytes);
  const node = nodes[Math.floor(rand() * nodes.length)]!;
  switch (Math.floor(rand() * 7)) {
    case 0:
      bytes[at]! ^= 1 << Math.floor(rand() * 8);
      return bytes;
    case 1:
      return bytes.subarray(0, at);
    case 2:
      return Buffer.concat([bytes.subarray(0, at), Buffer.from([Math.floor(rand() * 256)]), bytes.subarray(at)]);
    case 3:
      return Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + 1 + Math.floor(rand() * 8))]);
    case 4:
      // A tag of some TLV in the tree.
      bytes[node.start] = [0x02, 0x03, 0x04, 0x05, 0x06, 0x0c, 0x13, 0x1e, 0x1f, 0x30, 0x31, 0xa0, 0x82, 0x87][
        Math.floor(rand() * 14)
      ]!;
      return bytes;
    case 5:
      // A length byte of some TLV in the tree, set to an extreme.
      bytes[node.start + 1] = [0x00, 0x01, 0x7f, 0x80, 0x81, 0x84, 0x85, 0xff][Math.floor(rand() * 8)]!;
      return bytes;
    default:
      // A content byte of some TLV: inside names, keys and the signature.
      if (node.end > node.contentStart)
        bytes[node.contentStart + Math.floor(rand() * (node.end - node.contentStart))] = Math.floor(rand() * 256);
      return bytes;
  }
}

describe('fuzzing the reader', () => {
  const sources = ['rsa', 'p256', 'p384', 'p521', 'p192', 'ed25519'];

  it('3,000 mutated requests (DER and PEM) → a VerifiedCsr or an invalidCsr CertdeskError, never another exception', () => {
    const rand = prng(0xc5a1);
    const outcomes = { ok: 0, refused: 0 };
    for (let i = 0; i < 3000; i++) {
      const input = mutate(der(sources[i % sources.length]!), rand);
      const given = i % 3 === 0 ? toPem(input) : input;
      try {
        const verified = verifyCsr(readCsr(given));
        expect(isVerifiedCsr(verified)).toBe(true);
        outcomes.ok++;
      } catch (e) {
        if (
          !(e instanceof CertdeskError) ||
          e.kind !== 'invalidCsr' ||
          e.field !== 'CSR' ||
          !e.message.startsWith('The CSR ')
        ) {
          throw new Error(`mutation ${i} (${input.toString('base64')}) threw ${String(e)}`);
        }
        outcomes.refused++;
      }
    }
    expect(outcomes.refused).toBeGreaterThan(2500);
    expect(outcomes.ok + outcomes.refused).toBe(3000);
  });

  it('1,500 mutated CertificationRequestInfos, signed again → the field decoders face them: a VerifiedCsr or an invalidCsr', () => {
    const rand = prng(0x5eed);
    const outcomes: Record<string, number> = {};
    for (let i = 0; i < 1500; i++) {
      const name = ['rsa', 'p256', 'ed25519'][i % 3]!;
      const request = resigned(name, mutate(seq(...criParts(name)), rand));
      let outcome: CsrRequest | string;
      try {
        outcome = verifyCsr(readCsr(request));
        outcome = 'ok';
      } catch (e) {
        if (!(e instanceof CertdeskError) || e.kind !== 'invalidCsr')
          throw new Error(`mutation ${i} (${request.toString('base64')}) threw ${String(e)}`);
        outcome = e.message.replace(/\d+/g, 'N');
      }
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    }
    // The re-signed requests get past the signature, so the field decoders refuse most of them.
    expect(outcomes['The CSR could not be parsed: its fields do not decode.']).toBeGreaterThan(100);
    expect(outcomes.ok).toBeGreaterThan(50);
  });
});
