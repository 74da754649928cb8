import { execFileSync } from 'node:child_process';
import { createPrivateKey, createPublicKey } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CertdeskError } from '../../core/index.js';
import { parseCsr } from '../../validation/index.js';
import { generateKeyAndCsr, type GeneratedKeyAndCsr } from './keygen.js';

let dir = '';
let www: GeneratedKeyAndCsr;
let plain: GeneratedKeyAndCsr;

/** Runs openssl on a file holding `input`; returns stdout and stderr together. */
function openssl(input: string, ...args: string[]): string {
  const file = path.join(dir, `in-${Math.random().toString(36).slice(2)}.pem`);
  fs.writeFileSync(file, input);
  return execFileSync('openssl', [...args, '-in', file], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'certdesk-keygen-'));
  [www, plain] = await Promise.all([
    generateKeyAndCsr('www.Example-Shop.de'),
    generateKeyAndCsr('api.example-shop.de'),
  ]);
});

afterAll(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe('generateKeyAndCsr', () => {
  describe('makes a CSR that openssl and parseCsr accept', () => {
    it('passes openssl req -verify', () => {
      for (const { csrPem } of [www, plain]) {
        // openssl prints "verify OK" on stderr and exits non-zero on a bad signature.
        const result = execFileSync('openssl', ['req', '-verify', '-noout'], {
          input: csrPem,
          encoding: 'utf8',
          stdio: ['pipe', 'pipe', 'pipe'],
        });
        expect(result).toBe('');
      }
    });

    it('holds CN and SANs, RSA-2048 and SHA-256', () => {
      const text = openssl(www.csrPem, 'req', '-noout', '-text');
      expect(text).toMatch(/Subject: CN\s?=\s?www\.example-shop\.de/);
      expect(text).toMatch(/DNS:www\.example-shop\.de, DNS:example-shop\.de/);
      expect(parseCsr(www.csrPem)).toMatchObject({
        commonName: 'www.example-shop.de',
        dnsNames: ['www.example-shop.de', 'example-shop.de'],
        signatureAlgorithm: 'sha256WithRSAEncryption',
        keyAlgorithm: 'RSA',
        keyLength: 2048,
        rsa: { publicExponent: 65537n },
      });
    });

    it('adds the bare name only for a www. name', () => {
      expect(parseCsr(plain.csrPem).dnsNames).toEqual(['api.example-shop.de']);
    });

    it('normalizes IDNs and wildcards like checkDnsName', async () => {
      const idn = await generateKeyAndCsr('*.Bücher.de');
      expect(parseCsr(idn.csrPem)).toMatchObject({
        commonName: '*.xn--bcher-kva.de',
        dnsNames: ['*.xn--bcher-kva.de'],
      });
    });

    it('leaves the CN out when the name is longer than 64 characters', async () => {
      const long = `${'a'.repeat(60)}.example-shop.de`;
      const info = parseCsr((await generateKeyAndCsr(long)).csrPem);
      expect(info.commonName).toBe('');
      expect(info.dnsNames).toEqual([long]);
    });
  });

  describe('hands out a matching PKCS#8 private key', () => {
    it('is a PRIVATE KEY PEM ending in a newline, as is the CSR', () => {
      expect(www.privateKeyPem).toMatch(/^-----BEGIN PRIVATE KEY-----\n[\s\S]+\n-----END PRIVATE KEY-----\n$/);
      expect(www.csrPem).toMatch(/^-----BEGIN CERTIFICATE REQUEST-----\n[\s\S]+\n-----END CERTIFICATE REQUEST-----\n$/);
      expect(www.privateKeyPem).not.toContain('\r');
    });

    it('belongs to the CSR public key (checked by openssl and node)', () => {
      const fromKey = openssl(www.privateKeyPem, 'pkey', '-pubout');
      const fromCsr = openssl(www.csrPem, 'req', '-noout', '-pubkey');
      expect(fromKey).toBe(fromCsr);
      const spki = createPublicKey(createPrivateKey(www.privateKeyPem)).export({ type: 'spki', format: 'der' });
      expect(Buffer.from(parseCsr(www.csrPem).spkiDer).equals(spki)).toBe(true);
    });

    it('is fresh on every call', () => {
      expect(www.privateKeyPem).not.toBe(plain.privateKeyPem);
      expect(parseCsr(www.csrPem).rsa?.modulus).not.toBe(parseCsr(plain.csrPem).rsa?.modulus);
    });
  });

  describe('refuses names that checkDnsName refuses', () => {
    it.each([
      ['fail/internal', 'intranet.corp'],
      ['fail/ip', '192.0.2.1'],
      ['fail/public-suffix', 'co.uk'],
      ['fail/empty', ''],
    ])('%s', async (_id, name) => {
      const error = await generateKeyAndCsr(name).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(CertdeskError);
      expect(error).toMatchObject({ kind: 'invalidName', field: 'CommonName' });
    });
  });
});
