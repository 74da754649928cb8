import { describe, expect, it } from 'vitest';
import { DEFAULT_BLOCKED_NAMES, checkDnsName, checkDnsSyntax, isBlockedName } from './names.js';

const WILD = { allowWildcard: true };
const NO_WILD = { allowWildcard: false };

describe('checkDnsName', () => {
  describe('accepts and normalizes public names', () => {
    it.each([
      ['ok/plain', 'www.example.com', 'www.example.com'],
      ['ok/upper-case', 'WWW.Example.COM', 'www.example.com'],
      ['ok/surrounding-space', '  shop.example.com \n', 'shop.example.com'],
      ['ok/one-trailing-dot', 'example.com.', 'example.com'],
      ['ok/idn-to-punycode', 'Bücher.example.de', 'xn--bcher-kva.example.de'],
      ['ok/idn-tld', 'пример.рф', 'xn--e1afmkfd.xn--p1ai'],
      ['ok/punycode-kept', 'xn--bcher-kva.de', 'xn--bcher-kva.de'],
      ['ok/digits-and-hyphens', '1-2-3.example.com', '1-2-3.example.com'],
      ['ok/all-numeric-label-not-tld', '123.example.com', '123.example.com'],
      ['ok/multi-label-suffix', 'www.example.co.uk', 'www.example.co.uk'],
      ['ok/under-private-suffix', 'project.github.io', 'project.github.io'],
      ['ok/63-char-label', `${'a'.repeat(63)}.com`, `${'a'.repeat(63)}.com`],
      ['ok/253-chars', `${'a'.repeat(61)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(59)}.com`, undefined],
      ['ok/wildcard', '*.Example.com', '*.example.com'],
      ['ok/wildcard-idn', '*.bücher.de', '*.xn--bcher-kva.de'],
    ])('%s', (_id, input, expected) => {
      const result = checkDnsName(input, WILD);
      expect(result).toEqual({ ok: true, name: expected ?? input });
    });
  });

  describe('refuses with a problem naming the reason', () => {
    it.each([
      ['fail/empty', '', /empty/],
      ['fail/only-dot', '.', /empty/],
      ['fail/single-label', 'localhost', /not a fully qualified/],
      ['fail/two-trailing-dots', 'example.com..', /empty label/],
      ['fail/leading-dot', '.example.com', /empty label/],
      ['fail/double-dot', 'www..example.com', /empty label/],
      ['fail/leading-hyphen', '-www.example.com', /hyphen/],
      ['fail/trailing-hyphen', 'www-.example.com', /hyphen/],
      ['fail/underscore', '_acme.example.com', /character "_"/],
      ['fail/space', 'www example.com', /character " "/],
      ['fail/percent-escape', 'ex%41mple.com', /character "%"/],
      ['fail/slash', 'example.com/path', /character "\/"/],
      ['fail/label-64', `${'a'.repeat(64)}.com`, /longer than 63/],
      [
        'fail/name-254',
        `${'a'.repeat(62)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(59)}.com`,
        /longer than 253/,
      ],
      ['fail/numeric-tld', 'www.example.123', /all-numeric top-level/],
      ['fail/ipv4', '192.0.2.1', /IP address/],
      ['fail/ipv4-hex-form', '0x7f.1', /IP address|all-numeric/],
      ['fail/ipv6', '2001:db8::1', /IP address/],
      ['fail/ipv6-brackets', '[2001:db8::1]', /IP address/],
      ['fail/bad-punycode', 'xn--abc.example.com', /internationalized/],
      ['fail/internal-tld', 'server.corp', /public top-level domain/],
      ['fail/internal-local', 'printer.local', /public top-level domain/],
      ['fail/reserved-test-tld', 'www.example.test', /public top-level domain/],
      ['fail/is-public-suffix', 'co.uk', /public suffix/],
      ['fail/is-tld', 'com.', /not a fully qualified|public suffix/],
      ['fail/is-private-suffix', 'github.io', /public suffix/],
      ['fail/wildcard-on-suffix', '*.co.uk', /public suffix/],
      ['fail/wildcard-not-leftmost', 'www.*.example.com', /whole leftmost label/],
      ['fail/partial-wildcard', 'w*.example.com', /whole leftmost label/],
      ['fail/double-wildcard', '*.*.example.com', /whole leftmost label/],
      ['fail/bare-wildcard', '*', /whole leftmost label/],
      ['fail/too-long-input', 'a.'.repeat(600) + 'com', /too long/],
    ])('%s', (_id, input, problem) => {
      const result = checkDnsName(input, WILD);
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.problem).toMatch(problem);
    });

    it('fail/wildcard-not-allowed: refuses *. when the caller does not allow it', () => {
      expect(checkDnsName('*.example.com', NO_WILD)).toEqual({
        ok: false,
        problem: '"*.example.com": wildcard names are not allowed here.',
      });
      expect(checkDnsName('www.example.com', NO_WILD)).toEqual({ ok: true, name: 'www.example.com' });
    });

    it('never throws, whatever the input', () => {
      const odd = [
        '\u0000',
        '\uFFFF.com',
        '..',
        '*.',
        '.*',
        'a'.repeat(100_000),
        '\u200b',
        'ä'.repeat(300),
        null,
        undefined,
        42,
      ];
      for (const input of odd) {
        const result = checkDnsName(input as string, WILD);
        expect(result.ok).toBe(false);
      }
    });
  });
});

describe('checkDnsSyntax', () => {
  it.each([
    ['ok/internal-name-passes-syntax', 'server.corp', true],
    ['ok/public-suffix-passes-syntax', 'co.uk', true],
    ['fail/still-checks-labels', 'a..corp', false],
  ])('%s', (_id, input, ok) => {
    expect(checkDnsSyntax(input, WILD).ok).toBe(ok);
  });
});

describe('the built-in block list', () => {
  it.each([
    ['fail/onion', 'duckduckgogg42xjoc72x3sjasowoarfbgcmvfimaftt6twagswzczad.onion', true],
    ['fail/reverse-zone', '1.0.168.192.in-addr.arpa', true],
    ['fail/ipv6-reverse-zone', '1.0.0.0.ip6.arpa', true],
    ['fail/home-arpa', 'router.home.arpa', true],
    ['fail/alt', 'name.alt', true],
    ['fail/internal', 'app.corp.internal', true],
    ['fail/local', 'printer.local', true],
    ['ok/arpa-as-a-label-elsewhere', 'arpa.example.de', false],
    ['ok/onion-as-a-label-elsewhere', 'onion.shop.com', false],
  ])('%s', (_id, name, blocked) => {
    expect(isBlockedName(name, DEFAULT_BLOCKED_NAMES)).toBe(blocked);
  });
});

describe('isBlockedName', () => {
  const list = ['paypal', 'bank.example.com', '*.evil.com', 'Upper.Example.NET.'];
  it.each([
    ['ok/unrelated', 'www.shop.com', false],
    ['ok/label-contains-but-not-equals', 'paypalfan.com', false],
    ['ok/suffix-without-dot-boundary', 'mybank.example.com', false],
    ['ok/subdomains-only-entry-spares-parent', 'evil.com', false],
    ['fail/bare-label-anywhere', 'login.paypal.com', true],
    ['fail/bare-label-as-tld-part', 'paypal.secure-login.net', true],
    ['fail/exact-name', 'bank.example.com', true],
    ['fail/subdomain', 'www.bank.example.com', true],
    ['fail/case-and-trailing-dot', 'WWW.Bank.Example.Com.', true],
    ['fail/subdomains-only-entry', 'www.evil.com', true],
    ['fail/wildcard-under-subdomains-only-entry', '*.evil.com', true],
    ['fail/wildcard-of-blocked-name', '*.bank.example.com', true],
    ['fail/wildcard-covering-blocked-name', '*.example.com', true],
    ['ok/wildcard-two-levels-above-blocked-name', '*.com', false],
    ['ok/wildcard-beside-blocked-name', '*.other.example.com', false],
    ['ok/plain-parent-of-blocked-name', 'example.com', false],
    ['fail/entry-normalized', 'upper.example.net', true],
  ])('%s', (_id, name, blocked) => {
    expect(isBlockedName(name, list)).toBe(blocked);
  });

  it('compares IDNs in punycode form', () => {
    expect(isBlockedName('shop.xn--bcher-kva.de', ['bücher.de'])).toBe(true);
    expect(isBlockedName('shop.bücher.de', ['xn--bcher-kva.de'])).toBe(true);
  });

  it('ignores empty and bare-wildcard entries', () => {
    expect(isBlockedName('example.com', ['', '*', '*.'])).toBe(false);
  });
});

describe('DEFAULT_BLOCKED_NAMES', () => {
  it.each([
    ['fail/rfc2606-example-com', 'example.com', true],
    ['fail/rfc2606-subdomain', 'www.example.org', true],
    ['fail/rfc2606-example-net', 'mail.example.net', true],
    ['fail/rfc6761-test-tld', 'shop.test', true],
    ['fail/rfc6761-localhost-tld', 'app.localhost', true],
    ['fail/rfc6761-invalid-tld', 'x.invalid', true],
    ['fail/rfc6761-example-tld', 'x.example', true],
    ['fail/rfc6762-local', 'printer.local', true],
    ['ok/test-as-a-label', 'test.mycompany.com', false],
    ['ok/local-as-a-label', 'local.shop.de', false],
    ['ok/lookalike', 'example.co', false],
  ])('%s', (_id, name, blocked) => {
    expect(isBlockedName(name, DEFAULT_BLOCKED_NAMES)).toBe(blocked);
  });

  it('is frozen', () => {
    expect(Object.isFrozen(DEFAULT_BLOCKED_NAMES)).toBe(true);
  });
});
