import { describe, expect, it } from 'vitest';
import { ServiceUrls } from './urls.js';

describe('ServiceUrls', () => {
  it('builds every link from the public URL, with or without a trailing slash', () => {
    for (const base of ['https://certdesk.example', 'https://certdesk.example/']) {
      const u = new ServiceUrls(base);
      expect([u.crl('k1'), u.caCertificate('ca-1'), u.ocsp(), u.approval('t0k'), u.order(42), u.mailHost()]).toEqual([
        'https://certdesk.example/crl/k1.crl',
        'https://certdesk.example/pki/ca-1.crt',
        'https://certdesk.example/ocsp',
        'https://certdesk.example/dcv/approve/t0k',
        'https://certdesk.example/rest/v1/Order/42',
        'certdesk.example',
      ]);
    }
  });

  it('keeps a path prefix (a service behind a reverse proxy under /certdesk)', () => {
    expect(new ServiceUrls('https://pki.example/certdesk/').ocsp()).toBe('https://pki.example/certdesk/ocsp');
  });

  it('falls back to localhost as the mail host for an empty base', () => {
    expect(new ServiceUrls('').mailHost()).toBe('localhost');
  });
});
