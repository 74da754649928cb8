import { describe, expect, it } from 'vitest';
import { baseDomain } from './base-domain.js';

describe('baseDomain', () => {
  describe('returns the registered domain under the ICANN suffixes', () => {
    it.each([
      ['ok/domain-itself', 'example.com', 'example.com', 'example.com'],
      ['ok/subdomain', 'www.shop.example.com', 'www.shop.example.com', 'example.com'],
      ['ok/two-label-suffix', 'www.example.co.uk', 'www.example.co.uk', 'example.co.uk'],
      ['ok/normalized', ' WWW.Example.COM. ', 'www.example.com', 'example.com'],
      ['ok/wildcard-kept', '*.Example.com', '*.example.com', 'example.com'],
      ['ok/wildcard-deep', '*.a.b.example.co.uk', '*.a.b.example.co.uk', 'example.co.uk'],
      ['ok/idn', 'www.Bücher.de', 'www.xn--bcher-kva.de', 'xn--bcher-kva.de'],
      ['ok/idn-tld', 'www.пример.рф', 'www.xn--e1afmkfd.xn--p1ai', 'xn--e1afmkfd.xn--p1ai'],
      // Private suffixes do not count: the registrant of github.io is who a CA contacts.
      ['ok/private-suffix-ignored', 'project.github.io', 'project.github.io', 'github.io'],
      ['ok/private-suffix-itself', 'github.io', 'github.io', 'github.io'],
      ['ok/blogspot', 'me.blogspot.com', 'me.blogspot.com', 'blogspot.com'],
    ])('%s', (_id, input, fqdn, domain) => {
      expect(baseDomain(input)).toEqual({ fqdn, domain });
    });
  });

  describe('returns undefined without a registered domain', () => {
    it.each([
      ['fail/empty', ''],
      ['fail/single-label', 'localhost'],
      ['fail/icann-suffix', 'co.uk'],
      ['fail/tld', 'com'],
      ['fail/wildcard-on-suffix', '*.co.uk'],
      ['fail/internal-tld', 'server.corp'],
      ['fail/reserved-tld', 'www.example.test'],
      ['fail/ip', '192.0.2.1'],
      ['fail/syntax', 'www..example.com'],
      ['fail/underscore', '_dmarc.example.com'],
      ['fail/bad-wildcard', 'a.*.example.com'],
      ['fail/not-a-string', 42 as unknown as string],
    ])('%s', (_id, input) => {
      expect(baseDomain(input)).toBeUndefined();
    });
  });
});
