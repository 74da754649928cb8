import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkCsr } from '../src/ca/index.js';
import { CertdeskError } from '../src/core/index.js';
import { parseCsr } from '../src/validation/index.js';

// One CSR reader (src/core/csr.ts) behind the RA's checks (parseCsr) and the CA's gate (checkCsr):
// the same verdict on the same bytes, and a request verified once is handed to the CA as it is.

let dir = '';
const csr = (name: string): string => readFileSync(join(dir, `${name}.csr`), 'utf8');
const derOf = (pem: string): Buffer => Buffer.from(pem.replace(/-----[^-]+-----|\s/g, ''), 'base64');
const toPem = (bytes: Uint8Array): string =>
  `-----BEGIN CERTIFICATE REQUEST-----\n${Buffer.from(bytes).toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'certdesk-csr-reader-'));
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  openssl(
    'req',
    '-new',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'rsa.key',
    '-subj',
    '/CN=www.example.org',
    '-addext',
    'subjectAltName=DNS:www.example.org',
    '-out',
    'rsa.csr',
  );
  openssl(
    'req',
    '-new',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    'ec.key',
    '-subj',
    '/CN=www.example.org',
    '-out',
    'ec.csr',
  );
});
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function refusal(fn: () => unknown): CertdeskError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(CertdeskError);
    return e as CertdeskError;
  }
  throw new Error('the input was accepted');
}

describe('the CSR reader shared by the RA and the CA', () => {
  it.each([
    ['fail/truncated', () => toPem(derOf(csr('rsa')).subarray(0, 300))],
    ['fail/trailing-bytes', () => toPem(Buffer.concat([derOf(csr('rsa')), Buffer.from([0, 0])]))],
    ['fail/not-a-request', () => toPem(Buffer.from([0x30, 0x03, 0x02, 0x01, 0x00]))],
    [
      'fail/version-2',
      () => {
        const bytes = derOf(csr('ec'));
        bytes[bytes.indexOf(Buffer.from([0x02, 0x01, 0x00])) + 2] = 1;
        return toPem(bytes);
      },
    ],
    [
      'fail/tampered-subject',
      () => {
        const bytes = derOf(csr('ec'));
        bytes[bytes.indexOf('www.example.org')] = 'v'.charCodeAt(0);
        return toPem(bytes);
      },
    ],
    ['fail/too-large', () => `${csr('rsa')}${' '.repeat(64 * 1024)}`],
    ['fail/not-a-string', () => 42 as unknown as string],
  ])('%s: parseCsr and checkCsr refuse with the same error', (_id, input) => {
    const ra = refusal(() => parseCsr(input()));
    const ca = refusal(() => checkCsr(input()));
    expect({ kind: ra.kind, field: ra.field, message: ra.message }).toEqual({
      kind: ca.kind,
      field: ca.field,
      message: ca.message,
    });
  });

  it('ok/checkCsr takes the verified result of parseCsr as it is: the same request, names and hashes', () => {
    for (const name of ['rsa', 'ec']) {
      const info = parseCsr(csr(name));
      const checked = checkCsr(info);
      expect(checked.request).toBe(info);
      expect(checked).toMatchObject({ commonName: 'www.example.org', key: { type: name === 'rsa' ? 'rsa' : 'ecdsa' } });
      expect(checked.request.hashSha256).toBe(parseCsr(csr(name)).hashSha256);
      // The same outcome as from the raw text.
      expect(checkCsr(csr(name)).key).toEqual(checked.key);
    }
  });

  it('fail/a verified request whose bytes were changed afterwards is read again, and refused', () => {
    const info = parseCsr(csr('ec'));
    const der = info.der as Uint8Array;
    der[Buffer.from(der).indexOf('www.example.org')] = 'v'.charCodeAt(0);
    expect(refusal(() => checkCsr(info)).message).toMatch(/^The CSR signature does not verify/);
  });

  it('fail/an imitation of a verified request is not one', () => {
    const info = parseCsr(csr('ec'));
    expect(refusal(() => checkCsr({ ...info }))).toMatchObject({
      kind: 'invalidCsr',
      message: expect.stringMatching(/DER bytes or PEM text/),
    });
  });

  it('fuzz: for 2,000 mutated requests, checkCsr of the verified result and checkCsr of the bytes agree', () => {
    let seed = 0x0c5a;
    const rand = (n: number): number => {
      seed = (seed + 0x6d2b79f5) | 0;
      let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
      return Math.floor((((x ^ (x >>> 14)) >>> 0) / 4294967296) * n);
    };
    const verdict = (fn: () => { key: unknown }): string => {
      try {
        return JSON.stringify(fn().key, (_k, v: unknown) =>
          v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v,
        );
      } catch (e) {
        if (!(e instanceof CertdeskError) || (e.kind !== 'invalidCsr' && e.kind !== 'badKey')) throw e;
        return `${e.kind}: ${e.message}`;
      }
    };
    const counts = { verified: 0, refusedByBoth: 0 };
    for (let i = 0; i < 2000; i++) {
      const bytes = derOf(csr(i % 2 ? 'rsa' : 'ec'));
      for (let k = 0; k <= rand(3); k++) bytes[rand(bytes.length)] = rand(256);
      const pem = toPem(bytes.subarray(0, bytes.length - (rand(10) === 0 ? rand(40) : 0)));
      let info: ReturnType<typeof parseCsr> | undefined;
      try {
        info = parseCsr(pem);
      } catch (e) {
        expect(e).toMatchObject({ kind: 'invalidCsr', field: 'CSR' });
      }
      if (info === undefined) {
        // What the RA's reader refuses the CA refuses too (as badKey where its key policy speaks first).
        expect(verdict(() => checkCsr(pem))).toMatch(/^(invalidCsr|badKey): /);
        counts.refusedByBoth++;
      } else {
        expect(verdict(() => checkCsr(info))).toBe(verdict(() => checkCsr(pem)));
        counts.verified++;
      }
    }
    expect(counts.refusedByBoth).toBeGreaterThan(1500);
  });
});
