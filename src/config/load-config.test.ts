import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './load-config.js';

describe('loadConfig', () => {
  it('ok/defaults of DESIGN §4', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      host: '127.0.0.1',
      port: 8080,
      kvPort: 8081,
      dataDir: './data',
      validationHttpPort: 80,
      validationAllowPrivate: false,
      tokenTtl: 86400,
    });
    expect(c.databaseUrl).toBeUndefined();
    expect(c.publicUrl).toBe('http://127.0.0.1:8080');
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('ok/parses every kind of value', () => {
    const c = loadConfig({
      CERTDESK_PORT: '9000',
      CERTDESK_DNS_SERVERS: '127.0.0.1:5353, [::1]:53',
      CERTDESK_VALIDATION_ALLOW_PRIVATE: 'True',
      CERTDESK_PUBLIC_URL: 'https://certs.example.org/',
      CERTDESK_BLOCKED_NAMES: 'Bad.example, paypal',
    });
    expect(c.port).toBe(9000);
    expect(c.dnsServers).toEqual(['127.0.0.1:5353', '[::1]:53']);
    expect(c.validationAllowPrivate).toBe(true);
    expect(c.publicUrl).toBe('https://certs.example.org');
    expect(c.blockedNames).toEqual(['bad.example', 'paypal']);
  });

  it('ok/reads secrets from *_FILE', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cfg-'));
    writeFileSync(join(dir, 'db'), 'postgres://u@127.0.0.1/db\n');
    expect(loadConfig({ CERTDESK_DATABASE_URL_FILE: join(dir, 'db') }).databaseUrl).toBe('postgres://u@127.0.0.1/db');
  });

  it('ok/trust proxy: false, hops or addresses, never every hop', () => {
    expect(loadConfig({}).trustProxy).toBe(false);
    expect(loadConfig({ CERTDESK_TRUST_PROXY: 'true' }).trustProxy).toBe(1);
    expect(loadConfig({ CERTDESK_TRUST_PROXY: '2' }).trustProxy).toBe(2);
    expect(loadConfig({ CERTDESK_TRUST_PROXY: '10.0.0.0/8, 127.0.0.1' }).trustProxy).toEqual([
      '10.0.0.0/8',
      '127.0.0.1',
    ]);
    expect(() => loadConfig({ CERTDESK_TRUST_PROXY: 'everyone' })).toThrow(/CERTDESK_TRUST_PROXY/);
  });

  it('ok/request timeout: 30 s by default (docs/operations.md), milliseconds, positive', () => {
    expect(loadConfig({}).requestTimeoutMs).toBe(30_000);
    expect(loadConfig({ CERTDESK_REQUEST_TIMEOUT_MS: '1000' }).requestTimeoutMs).toBe(1000);
    expect(() => loadConfig({ CERTDESK_REQUEST_TIMEOUT_MS: '0' })).toThrow(
      /CERTDESK_REQUEST_TIMEOUT_MS: not a positive integer/,
    );
    expect(() => loadConfig({ CERTDESK_REQUEST_TIMEOUT_MS: '30s' })).toThrow(/CERTDESK_REQUEST_TIMEOUT_MS/);
  });

  it('ok/CA recheck: 60 s by default, 0 turns it off, at most a day (a timer cannot wait much longer)', () => {
    expect(loadConfig({}).caRecheckSeconds).toBe(60);
    expect(loadConfig({ CERTDESK_CA_RECHECK_SECONDS: '0' }).caRecheckSeconds).toBe(0);
    expect(loadConfig({ CERTDESK_CA_RECHECK_SECONDS: '86400' }).caRecheckSeconds).toBe(86_400);
    expect(() => loadConfig({ CERTDESK_CA_RECHECK_SECONDS: '2147484' })).toThrow(
      /CERTDESK_CA_RECHECK_SECONDS.*more than 86400/,
    );
  });

  it('fail/a database URL of an unknown scheme is a bad key, not a SQLite file name', () => {
    expect(loadConfig({ CERTDESK_DATABASE_URL: 'postgresql://u@h/db' }).databaseUrl).toBe('postgresql://u@h/db');
    expect(loadConfig({ CERTDESK_DATABASE_URL: '/var/lib/certdesk/db.sqlite' }).databaseUrl).toBe(
      '/var/lib/certdesk/db.sqlite',
    );
    expect(() => loadConfig({ CERTDESK_DATABASE_URL: 'postgress://u@h/db' })).toThrow(
      /CERTDESK_DATABASE_URL: unsupported scheme postgress/,
    );
  });

  it('fail/lists every bad key at once', () => {
    let err: unknown;
    try {
      loadConfig({
        CERTDESK_PORT: 'http',
        CERTDESK_KV_PORT: '70000',
        CERTDESK_SMTP_URL: 'mail.example',
        CERTDESK_TOKEN_TTL: '-1',
        CERTDESK_PORTT: '1',
      });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const problems = (err as ConfigError).problems.join('\n');
    for (const name of [
      'CERTDESK_PORT:',
      'CERTDESK_KV_PORT',
      'CERTDESK_SMTP_URL',
      'CERTDESK_TOKEN_TTL',
      'CERTDESK_PORTT: unknown',
    ])
      expect(problems).toContain(name);
    expect((err as ConfigError).problems).toHaveLength(5);
  });
});
