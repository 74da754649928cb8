import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OpensslCa, type CaCert } from '../../test/support/openssl-ca.js';
import { TAG, children, contents, oidText, readTlv } from '../core/der.js';
import { NULL, oid, seq } from './der-writer.js';
import {
  OcspMalformedError,
  buildOcspResponse,
  certIdFor,
  ocspErrorResponse,
  parseOcspRequest,
  type OcspErrorStatus,
  type OcspSingle,
  type OcspStatus,
} from './ocsp.js';

const SHA1 = '1.3.14.3.2.26';
const SHA256 = '2.16.840.1.101.3.4.2.1';

// Fixtures: an ECDSA P-256 root, an RSA-2048 intermediate, leaves and a delegated OCSP responder.
const fx = new OpensslCa('ocsp-test-');
const { openssl, run } = fx;
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const file = (name: string) => new Uint8Array(readFileSync(fx.path(name)));

let root: CaCert;
let inter: CaCert;
let responder: CaCert;
const now = Math.floor(Date.now() / 1000);

beforeAll(() => {
  fx.setUp();
  fx.issue('good', 'int', '0x1001', 'leaf');
  fx.issue('revoked', 'int', '0x1002', 'leaf');
  fx.issue('noreason', 'int', '0x1003', 'leaf');
  fx.issue('rootleaf', 'root', '0x2001', 'leaf');
  fx.issue('responder', 'int', '0x1ff0', 'responder');
  root = fx.cert('root.pem', 'root.key', false);
  inter = fx.cert('int.pem', 'int.key', true);
  responder = fx.cert('responder.pem', 'responder.key', false);
  // Requests as openssl makes them.
  openssl('ocsp', '-issuer', 'int.pem', '-cert', 'good.pem', '-reqout', 'good.req', '-no_nonce');
  openssl('ocsp', '-issuer', 'int.pem', '-cert', 'good.pem', '-reqout', 'nonce.req');
  openssl('ocsp', '-issuer', 'int.pem', '-sha256', '-cert', 'revoked.pem', '-reqout', 'sha256.req', '-no_nonce');
  openssl('ocsp', '-issuer', 'int.pem', '-cert', 'good.pem', '-cert', 'revoked.pem', '-reqout', 'two.req', '-no_nonce');
  openssl('ocsp', '-issuer', 'int.pem', '-serial', '0x00ff', '-reqout', 'serial.req', '-no_nonce');
  openssl(
    'ocsp',
    '-issuer',
    'int.pem',
    '-cert',
    'good.pem',
    '-reqout',
    'signed.req',
    '-signer',
    'good.pem',
    '-signkey',
    'good.key',
  );
  openssl('ocsp', '-issuer', 'root.pem', '-cert', 'rootleaf.pem', '-reqout', 'root.req', '-no_nonce');
}, 60_000);

afterAll(() => fx.cleanUp());

const REQUESTS = ['good.req', 'nonce.req', 'sha256.req', 'two.req', 'serial.req', 'signed.req', 'root.req'];

describe('parseOcspRequest', () => {
  it('reads an openssl request without nonce, and certIdFor reproduces its CertID', () => {
    const info = parseOcspRequest(file('good.req'));
    expect(info.nonce).toBeUndefined();
    expect(info.certIds).toHaveLength(1);
    const [id] = info.certIds;
    expect(id!.hashAlgorithm).toBe(SHA1);
    expect(hex(id!.serial)).toBe('1001');
    expect(hex(id!.issuerNameHash)).toBe(createHash('sha1').update(inter.name).digest('hex'));
    expect(hex(id!.issuerKeyHash)).toBe(hex(inter.keyHash));
    expect(hex(id!.der)).toBe(hex(certIdFor(inter.name, inter.spki, id!.serial)));
    expect(hex(id!.der)).toBe(hex(certIdFor(inter.name, inter.spki, Uint8Array.of(0, 0x10, 0x01), 'sha1')));
  });

  it('returns the nonce openssl put in the request', () => {
    const info = parseOcspRequest(file('nonce.req'));
    expect(info.nonce).toHaveLength(16);
    const text = openssl('ocsp', '-reqin', 'nonce.req', '-req_text');
    // openssl prints the extnValue, i.e. the OCTET STRING (04 10) wrapping the nonce.
    const printed = /OCSP Nonce:\s*\n\s*([0-9A-F]+)/.exec(text)![1]!;
    expect(printed.toLowerCase()).toBe(`0410${hex(info.nonce!)}`);
    expect(hex(info.certIds[0]!.serial)).toBe('1001');
  });

  it('returns copies, not views of the request buffer', () => {
    const buf = readFileSync(fx.path('nonce.req'));
    const info = parseOcspRequest(buf);
    const before = [
      hex(info.nonce!),
      hex(info.certIds[0]!.der),
      hex(info.certIds[0]!.serial),
      hex(info.certIds[0]!.issuerKeyHash),
    ];
    buf.fill(0);
    expect([
      hex(info.nonce!),
      hex(info.certIds[0]!.der),
      hex(info.certIds[0]!.serial),
      hex(info.certIds[0]!.issuerKeyHash),
    ]).toEqual(before);
    expect(Buffer.isBuffer(info.certIds[0]!.der)).toBe(false);
  });

  it('reads SHA-256 CertIDs', () => {
    const [id] = parseOcspRequest(file('sha256.req')).certIds;
    expect(id!.hashAlgorithm).toBe(SHA256);
    expect(id!.issuerKeyHash).toHaveLength(32);
    expect(hex(id!.serial)).toBe('1002');
    expect(hex(id!.der)).toBe(hex(certIdFor(inter.name, inter.spki, id!.serial, 'sha256')));
    expect(hex(id!.der)).not.toBe(hex(certIdFor(inter.name, inter.spki, id!.serial, 'sha1')));
  });

  it('reads several CertIDs in order, strips serial leading zeros, accepts a signed request', () => {
    expect(parseOcspRequest(file('two.req')).certIds.map((c) => hex(c.serial))).toEqual(['1001', '1002']);
    const [id] = parseOcspRequest(file('serial.req')).certIds;
    expect(hex(id!.serial)).toBe('ff');
    expect(hex(id!.der)).toBe(hex(certIdFor(inter.name, inter.spki, Uint8Array.of(0xff))));
    const signed = file('signed.req');
    expect(children(signed, readTlv(signed, 0))).toHaveLength(2); // it does carry optionalSignature
    const info = parseOcspRequest(signed);
    expect(hex(info.certIds[0]!.serial)).toBe('1001');
    expect(info.nonce).toHaveLength(16);
  });

  it('rejects garbage, empty, truncated and trailing input with OcspMalformedError', () => {
    const good = file('good.req');
    const bad = [
      new Uint8Array(0),
      Uint8Array.of(0x30),
      Uint8Array.of(0x30, 0x80, 0x00, 0x00),
      Buffer.from('hello world'),
      randomBytes(300),
      Uint8Array.of(...good, 0),
      Uint8Array.of(0x31, ...good.subarray(1)),
    ];
    for (let n = 0; n < good.length; n++) bad.push(good.subarray(0, n));
    for (const der of bad) expect(() => parseOcspRequest(der)).toThrow(OcspMalformedError);
  });

  it('rejects hand-made malformed structures', () => {
    // OCSPRequest { TBSRequest { requestList { Request { CertID { … } } } } }
    const reqOf = (certId: Uint8Array) => seq(seq(seq(seq(seq(certId)))));
    const alg = seq(oid(SHA1), NULL);
    const h20 = Uint8Array.of(0x04, 20, ...new Uint8Array(20));
    const cases: [Uint8Array, string][] = [
      [seq(seq(seq())), 'empty requestList'],
      [reqOf(Uint8Array.of(...alg, ...h20, ...h20, 0x02, 0x01, 0x80)), 'negative serial'],
      [reqOf(Uint8Array.of(...alg, ...h20, ...h20, 0x02, 0x02, 0x00, 0x01)), 'non-minimal INTEGER'],
      [reqOf(Uint8Array.of(...alg, ...h20, ...h20, 0x02, 0x00)), 'empty INTEGER'],
      [
        reqOf(Uint8Array.of(...alg, 0x04, 0x01, 0x00, ...h20, 0x02, 0x01, 0x01)),
        'hash length does not match hashAlgorithm',
      ],
      [reqOf(Uint8Array.of(...alg, ...h20, ...h20)), 'bad CertID'],
      [reqOf(Uint8Array.of(...seq(oid(SHA1), oid(SHA1)), ...h20, ...h20, 0x02, 0x01, 0x01)), 'bad hash parameters'],
    ];
    for (const [der, message] of cases) expect(() => parseOcspRequest(der)).toThrow(new OcspMalformedError(message));
    // The well-formed version of the same request parses.
    expect(parseOcspRequest(reqOf(Uint8Array.of(...alg, ...h20, ...h20, 0x02, 0x01, 0x01))).certIds).toHaveLength(1);
  });

  it('throws only OcspMalformedError on 1,000 random mutations of valid requests', () => {
    let seed = 0x5eed;
    const rand = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 8) % n;
    };
    const bases = REQUESTS.map(file);
    let rejected = 0;
    let accepted = 0;
    for (let i = 0; i < 1000; i++) {
      let m = Array.from(bases[rand(bases.length)]!);
      for (let k = rand(3) + 1; k > 0; k--) {
        const at = rand(m.length);
        switch (rand(5)) {
          case 0:
            m[at] = rand(256);
            break;
          case 1:
            m[at] = m[at]! ^ (1 << rand(8));
            break;
          case 2:
            m.splice(at, 1);
            break;
          case 3:
            m.splice(at, 0, rand(256));
            break;
          default:
            m = m.slice(0, at);
            break;
        }
      }
      try {
        const info = parseOcspRequest(Uint8Array.from(m));
        expect(info.certIds.length).toBeGreaterThan(0);
        accepted++;
      } catch (e) {
        expect(e).toBeInstanceOf(OcspMalformedError);
        rejected++;
      }
    }
    console.log(`OCSP fuzz: ${rejected} rejected, ${accepted} still well-formed`);
    expect(rejected).toBeGreaterThan(500);
  });
});

describe('buildOcspResponse', () => {
  const window = { thisUpdate: now - 60, nextUpdate: now + 3600 };
  const single = (certId: Uint8Array, status: OcspStatus): OcspSingle => ({ certId, status, ...window });
  const respond = (name: string, by: CaCert, responses: OcspSingle[], certs?: Uint8Array[]) => {
    writeFileSync(
      fx.path(name),
      buildOcspResponse({ responderKeyHash: by.keyHash, producedAt: now - 30, responses, certs }, by.signer),
    );
    return name;
  };
  const verifyArgs = (resp: string, issuer: string, ...ids: string[]) => [
    'ocsp',
    '-respin',
    resp,
    '-issuer',
    issuer,
    '-CAfile',
    'root.pem',
    '-no_nonce',
    '-resp_text',
    ...ids,
  ];

  it('signs good, revoked (keyCompromise), revoked (no reason) and unknown with the RSA issuing CA', () => {
    const idOf = (req: string) => parseOcspRequest(file(req)).certIds[0]!.der;
    const serial = (s: string) => certIdFor(inter.name, inter.spki, Uint8Array.from(Buffer.from(s, 'hex')));
    const cases: [OcspStatus, Uint8Array, string[], RegExp][] = [
      [{ kind: 'good' }, idOf('good.req'), ['-cert', 'good.pem'], /good\.pem: good/],
      [
        { kind: 'revoked', at: now - 600, reason: 1 },
        serial('1002'),
        ['-cert', 'revoked.pem'],
        /revoked\.pem: revoked\n\s*This Update: .*\n\s*Next Update: .*\n\s*Reason: keyCompromise\n\s*Revocation Time: /,
      ],
      [
        { kind: 'revoked', at: now - 600, reason: null },
        serial('1003'),
        ['-cert', 'noreason.pem'],
        /noreason\.pem: revoked\n\s*This Update: .*\n\s*Next Update: .*\n\s*Revocation Time: /,
      ],
      [{ kind: 'unknown' }, serial('0999'), ['-serial', '0x999'], /0x999: unknown/],
    ];
    for (const [status, certId, ids, expected] of cases) {
      const resp = respond('resp.der', inter, [single(certId, status)]);
      const r = run(...verifyArgs(resp, 'int.pem', ...ids));
      expect(r.out).toContain('Response verify OK');
      expect(r.out).toMatch(expected);
      expect(r.out).not.toContain('WARNING');
      expect(r.out).toContain(`Responder Id: ${hex(inter.keyHash).toUpperCase()}`);
      expect(r.status).toBe(0);
    }
  });

  it('puts several SingleResponses in one response', () => {
    const resp = respond('multi.der', inter, [
      single(certIdFor(inter.name, inter.spki, Uint8Array.of(0x10, 0x01)), { kind: 'good' }),
      single(certIdFor(inter.name, inter.spki, Uint8Array.of(0x10, 0x02), 'sha256'), {
        kind: 'revoked',
        at: now - 5,
        reason: 4,
      }),
      single(certIdFor(inter.name, inter.spki, Uint8Array.of(0x10, 0x02)), { kind: 'revoked', at: now - 5, reason: 4 }),
    ]);
    const r = run(...verifyArgs(resp, 'int.pem', '-cert', 'good.pem', '-cert', 'revoked.pem'));
    expect(r.out).toContain('Response verify OK');
    expect(r.out).toMatch(/good\.pem: good/);
    expect(r.out).toMatch(/revoked\.pem: revoked[^]*Reason: superseded/);
  });

  it('answers a nonce request without a nonce (RFC 5019 cached responses)', () => {
    const [id] = parseOcspRequest(file('nonce.req')).certIds;
    const resp = respond('nonce.der', inter, [single(id!.der, { kind: 'good' })]);
    const r = run('ocsp', '-respin', resp, '-reqin', 'nonce.req', '-issuer', 'int.pem', '-CAfile', 'root.pem');
    expect(r.out).toContain('WARNING: no nonce in response');
    expect(r.out).toContain('Response verify OK');
  });

  it('signs with an ECDSA root directly', () => {
    const [id] = parseOcspRequest(file('root.req')).certIds;
    const resp = respond('root.der', root, [single(id!.der, { kind: 'revoked', at: now - 100, reason: 1 })]);
    const r = run(...verifyArgs(resp, 'root.pem', '-cert', 'rootleaf.pem'));
    expect(r.out).toContain('Response verify OK');
    expect(r.out).toMatch(/rootleaf\.pem: revoked[^]*Reason: keyCompromise/);
  });

  it('includes certs for a delegated responder', () => {
    const [id] = parseOcspRequest(file('good.req')).certIds;
    const resp = respond('delegated.der', responder, [single(id!.der, { kind: 'good' })], [responder.der]);
    const r = run(...verifyArgs(resp, 'int.pem', '-cert', 'good.pem', '-verify_other', 'int.pem'));
    expect(r.out).toContain('Response verify OK');
    expect(r.out).toContain('good.pem: good');
    expect(r.out).toMatch(/Certificate:[^]*Subject: CN ?= ?responder\.example/);
    // Without the certs, openssl cannot find the signer.
    respond('nocerts.der', responder, [single(id!.der, { kind: 'good' })]);
    const bad = run(...verifyArgs('nocerts.der', 'int.pem', '-cert', 'good.pem', '-verify_other', 'int.pem'));
    expect(bad.out).not.toContain('Response verify OK');
  });

  it('fails verification when signed by the wrong key', () => {
    const [id] = parseOcspRequest(file('good.req')).certIds;
    const forged = buildOcspResponse(
      { responderKeyHash: inter.keyHash, producedAt: now, responses: [single(id!.der, { kind: 'good' })] },
      { algorithm: inter.signer.algorithm, sign: (d) => responder.signer.sign(d) },
    );
    writeFileSync(fx.path('forged.der'), forged);
    const r = run(...verifyArgs('forged.der', 'int.pem', '-cert', 'good.pem'));
    expect(r.out).not.toContain('Response verify OK');
    expect(r.status).not.toBe(0);
  });

  it('encodes ResponseData without version, byKey, and the status choices exactly', () => {
    const id = certIdFor(root.name, root.spki, Uint8Array.of(1));
    const der = buildOcspResponse(
      {
        responderKeyHash: root.keyHash,
        producedAt: 1_700_000_000,
        responses: [
          { certId: id, status: { kind: 'good' }, thisUpdate: 1_700_000_000, nextUpdate: 1_700_003_600 },
          { certId: id, status: { kind: 'unknown' }, thisUpdate: 1_700_000_000, nextUpdate: 1_700_003_600 },
          {
            certId: id,
            status: { kind: 'revoked', at: 1_600_000_000, reason: 1 },
            thisUpdate: 1_700_000_000,
            nextUpdate: 1_700_003_600,
          },
          {
            certId: id,
            status: { kind: 'revoked', at: 1_600_000_000, reason: 0 },
            thisUpdate: 1_700_000_000,
            nextUpdate: 1_700_003_600,
          },
        ],
      },
      root.signer,
    );
    const top = children(der, readTlv(der, 0));
    expect(hex(der.subarray(top[0]!.start, top[0]!.end))).toBe('0a0100');
    const rb = children(der, children(der, top[1]!)[0]!);
    expect(oidText(der, rb[0]!)).toBe('1.3.6.1.5.5.7.48.1.1');
    const basic = contents(der, rb[1]!);
    const [tbsT, alg, sig, ...rest] = children(basic, readTlv(basic, 0));
    expect(rest).toHaveLength(0); // no certs
    expect(hex(basic.subarray(alg!.start, alg!.end))).toBe(hex(root.signer.algorithm));
    expect(sig!.tag).toBe(TAG.BIT_STRING);
    const tbs = children(basic, tbsT!);
    expect(tbs.map((t) => t.tag)).toEqual([0xa2, 0x18, 0x30]); // no version, no extensions
    expect(hex(contents(basic, tbs[0]!))).toBe(`0414${hex(root.keyHash)}`);
    expect(Buffer.from(contents(basic, tbs[1]!)).toString('latin1')).toBe('20231114221320Z');
    const singles = children(basic, tbs[2]!).map((s) => children(basic, s));
    for (const s of singles) {
      expect(hex(basic.subarray(s[0]!.start, s[0]!.end))).toBe(hex(id));
      expect(s.slice(2).map((t) => t.tag)).toEqual([0x18, 0xa0]);
    }
    const status = (i: number) => hex(basic.subarray(singles[i]![1]!.start, singles[i]![1]!.end));
    expect(status(0)).toBe('8000');
    expect(status(1)).toBe('8200');
    expect(status(2)).toBe(`a116${hex(Buffer.from('\x18\x0f20200913122640Z', 'latin1'))}a0030a0101`);
    expect(status(3)).toBe(`a111${hex(Buffer.from('\x18\x0f20200913122640Z', 'latin1'))}`);
  });

  it('rejects invalid input', () => {
    const id = certIdFor(root.name, root.spki, Uint8Array.of(1));
    const base = { responderKeyHash: root.keyHash, producedAt: now, responses: [single(id, { kind: 'good' })] };
    expect(() => buildOcspResponse({ ...base, responses: [] }, root.signer)).toThrow(RangeError);
    expect(() => buildOcspResponse({ ...base, responderKeyHash: new Uint8Array(32) }, root.signer)).toThrow(RangeError);
    for (const reason of [7, 8, 11]) {
      expect(() =>
        buildOcspResponse({ ...base, responses: [single(id, { kind: 'revoked', at: now, reason })] }, root.signer),
      ).toThrow(RangeError);
    }
  });

  it('builds one ECDSA P-256 response in well under a millisecond', () => {
    const id = certIdFor(root.name, root.spki, Uint8Array.of(1));
    const n = 2000;
    const started = performance.now();
    for (let i = 0; i < n; i++) {
      buildOcspResponse(
        { responderKeyHash: root.keyHash, producedAt: now, responses: [single(id, { kind: 'good' })] },
        root.signer,
      );
    }
    const us = ((performance.now() - started) * 1000) / n;
    console.log(`OCSP response build (P-256): ${us.toFixed(1)} µs each`);
    expect(us).toBeLessThan(5000);
  });
});

describe('ocspErrorResponse', () => {
  const codes: [OcspErrorStatus, number][] = [
    ['malformedRequest', 1],
    ['internalError', 2],
    ['tryLater', 3],
    ['sigRequired', 5],
    ['unauthorized', 6],
  ];
  for (const [status, code] of codes) {
    it(`encodes ${status} (${code}) as openssl reads it`, () => {
      const der = ocspErrorResponse(status);
      expect(hex(der)).toBe(`30030a010${code}`);
      writeFileSync(fx.path('err.der'), der);
      const r = run('ocsp', '-respin', 'err.der', '-resp_text', '-noverify');
      expect(r.out).toContain(`Responder Error: ${status.toLowerCase()} (${code})`);
    });
  }
});
