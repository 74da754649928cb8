import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { logRedaction, redactingLogger, redactUrl, secretInQuery } from './log-redaction.js';

const secret = `cds_${'A1b2C3d4'.repeat(5)}xyz`;

describe('redactUrl', () => {
  it.each([
    [
      'ok/nothing to redact keeps the URL byte for byte',
      '/rest/v1/Order/12?includeFulfillment=true&Status=COMPLETE,PENDING',
      '/rest/v1/Order/12?includeFulfillment=true&Status=COMPLETE,PENDING',
    ],
    [
      'ok/secret-named parameters',
      '/oauth2/token?client_id=app1&client_secret=s3&refresh_token=r&code=c&code_verifier=v',
      '/oauth2/token?client_id=app1&client_secret=[redacted]&refresh_token=[redacted]&code=[redacted]&code_verifier=[redacted]',
    ],
    [
      'ok/names are matched case-insensitively and decoded',
      '/x?Access_Token=a&api%5Fkey=k&X-API-KEY=k&apikey=k&key=k&Password=p&token=t&secret=s',
      '/x?Access_Token=[redacted]&api%5Fkey=[redacted]&X-API-KEY=[redacted]&apikey=[redacted]&key=[redacted]&Password=[redacted]&token=[redacted]&secret=[redacted]',
    ],
    ['ok/a certdesk secret under any name', `/rest/v1/Profile?q=${secret}`, '/rest/v1/Profile?q=[redacted]'],
    ['ok/a certdesk secret as a bare parameter', `/x?${secret}&a=1`, '/x?[redacted]&a=1'],
    ['ok/the approval token in the path', '/dcv/approve/cda_abcdefghijklmnopqrstu?x=1', '/dcv/approve/[redacted]?x=1'],
    ['ok/the approval path however it is encoded', '/dcv/%61pprove/notAPrefixedToken', '/dcv/approve/[redacted]'],
    ['ok/a voucher code of the owner', '/rest/v1/Voucher/7KQM-XD4R-AAAA-BBBB-CCCC-DDDD', '/rest/v1/Voucher/[redacted]'],
    [
      'ok/a voucher code, anonymous',
      '/rest/v1/Voucher/*/7KQM-XD4R-AAAA-BBBB-CCCC-DDDD/',
      '/rest/v1/Voucher/*/[redacted]/',
    ],
    ['ok/a voucher code, encoded star', '/rest/v1/Voucher/%2A/7kqmxd4r?x=1', '/rest/v1/Voucher/*/[redacted]?x=1'],
    ['ok/the order of a voucher code', '/rest/v1/Order/*/7KQM-XD4R-AAAA', '/rest/v1/Order/*/[redacted]'],
    ['ok/the voucher list and orders by id stay readable', '/rest/v1/Vouchers', '/rest/v1/Vouchers'],
    ['ok/an order id stays readable', '/rest/v1/Order/42', '/rest/v1/Order/42'],
    ['ok/a certdesk secret in any path', `/rest/v1/${secret}/x`, '/rest/v1/[redacted]/x'],
    ...['cdw', 'cdo', 'cdu'].map((prefix) => [
      `ok/a ${prefix}_ session secret in a query and a path`,
      `/pki/${prefix}_${'Z9y8X7w6'.repeat(4)}?note=${prefix}_${'Q1w2E3r4'.repeat(4)}`,
      '/pki/[redacted]?note=[redacted]',
    ]),
    ['ok/broken percent-encoding does not throw', '/a%zz?b%zz=1&token=%zz', '/a%zz?b%zz=1&token=[redacted]'],
  ])('%s', (_name, url, expected) => {
    expect(redactUrl(url)).toBe(expected);
  });
});

describe('secretInQuery', () => {
  it.each([
    ['ok/no query', {}, undefined],
    ['ok/ordinary parameters', { client_id: 'app', grant_type: 'client_credentials', Status: ['A', 'B'] }, undefined],
    ['fail/client_secret', { client_id: 'app', client_secret: 'x' }, 'client_secret'],
    ['fail/a key by another name', { apikey: 'x' }, 'apikey'],
    ['fail/a certdesk secret as a value', { q: ['a', secret] }, 'q'],
    ['fail/a certdesk secret as a name is not echoed', { [secret]: '' }, '[redacted]'],
  ])('%s', (_name, query, expected) => {
    expect(secretInQuery(query)).toBe(expected);
  });
});

describe('logRedaction', () => {
  const capture = () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    return { lines, sink };
  };

  it('removes secret members, credential headers and raw request bytes from errors', () => {
    const { lines, sink } = capture();
    const log = pino({ level: 'info', ...logRedaction }, sink);
    const cause = Object.assign(new Error('inner'), { rawPacket: Buffer.from(`x-api-key: ${secret}`) });
    const err = Object.assign(new Error(`bad ${secret}`, { cause }), {
      rawPacket: Buffer.from(`x-api-key: ${secret}`),
      code: 'HPE_X',
    });
    log.info(
      {
        client_secret: secret,
        user: { password: secret },
        headers: { authorization: secret, 'x-api-key': secret, cookie: secret },
        err,
      },
      'm',
    );
    log.info(
      { req: { method: 'GET', url: `/kv?key=${secret}`, headers: { authorization: secret }, ip: '127.0.0.1' } },
      'r',
    );
    const out = lines.join('');
    expect(lines).toHaveLength(2);
    expect(out).not.toContain(secret);
    expect(out).not.toContain('rawPacket');
    expect(out).toContain('"code":"HPE_X"');
    expect(JSON.parse(lines[1]!).req).toEqual({ method: 'GET', url: '/kv?key=[redacted]', remoteAddress: '127.0.0.1' });
  });

  it('redactingLogger applies it to a logger built without it', () => {
    const { lines, sink } = capture();
    redactingLogger(pino({ level: 'info' }, sink)).info(
      { refresh_token: secret, req: { url: `/x?token=${secret}` } },
      'm',
    );
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain(secret);
  });
});
