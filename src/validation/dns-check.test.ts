import { createSocket, type Socket } from 'node:dgram';
import { Packet, createServer, type DnsServer } from 'dns2';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startDnsServer, type TestDnsServer } from '../../test/support/dns-server.js';
import { refusedUdpPort, type RefusedPort } from '../../test/support/refused-ports.js';
import { CertdeskError } from '../core/index.js';
import {
  DcvResolver,
  DnsLookupError,
  checkCaa,
  checkDnsCname,
  checkDnsTxt,
  discoverApprovers,
  lookupsOnce,
  type CaaRecord,
  type DnsLookups,
} from './dns-check.js';

// Every test talks real DNS (UDP, TCP for long answers) to an authoritative server on loopback.
const US = ['trustpoint.certdesk.test'];
const TIMEOUT = 20_000;

let dns: TestDnsServer;
let resolver: DcvResolver;

beforeAll(async () => {
  dns = await startDnsServer();
  resolver = new DcvResolver({ servers: [dns.address], timeoutMs: 2000, tries: 2 });
});
afterAll(async () => {
  await dns?.close();
});
beforeEach(() => dns.clear());

describe('DcvResolver', () => {
  it(
    'ok/txt joins the strings of each record and normalizes the name',
    async () => {
      dns.set('txt.example.com', [
        { type: 'TXT', data: 'one' },
        { type: 'TXT', data: 'two' },
      ]);
      expect((await resolver.txt('TXT.Example.COM.')).sort()).toEqual(['one', 'two']);
    },
    TIMEOUT,
  );

  it(
    'ok/txt over 255 bytes arrives as one value (split into strings on the wire)',
    async () => {
      const long = 'a'.repeat(255) + 'b'.repeat(255) + 'c'.repeat(10);
      dns.set('long.example.com', [{ type: 'TXT', data: long }]);
      expect(await resolver.txt('long.example.com')).toEqual([long]);
    },
    TIMEOUT,
  );

  it(
    'ok/txt too large for UDP comes over TCP',
    async () => {
      const huge = 'x'.repeat(3000);
      dns.set('huge.example.com', [{ type: 'TXT', data: huge }]);
      expect(await resolver.txt('huge.example.com')).toEqual([huge]);
    },
    TIMEOUT,
  );

  it(
    'ok/empty for NXDOMAIN and for NODATA',
    async () => {
      dns.set('a.b.example.com', [{ type: 'TXT', data: 'deep' }]);
      expect(await resolver.txt('nothing.example.com')).toEqual([]); // NXDOMAIN
      expect(await resolver.txt('b.example.com')).toEqual([]); // empty non-terminal: NODATA
      expect(await resolver.caa('a.b.example.com')).toEqual([]); // NODATA
      expect(await resolver.cname('a.b.example.com')).toBeNull();
      expect(await resolver.addresses('nothing.example.com')).toEqual([]);
    },
    TIMEOUT,
  );

  it(
    'ok/cname lower-case without trailing dot',
    async () => {
      dns.set('alias.example.com', [{ type: 'CNAME', target: 'Target.Example.NET.' }]);
      expect(await resolver.cname('alias.example.com')).toBe('target.example.net');
    },
    TIMEOUT,
  );

  it(
    'ok/caa records with flags, tag lower-cased',
    async () => {
      dns.set('caa.example.com', [
        { type: 'CAA', flags: 0, tag: 'issue', value: 'ca.example; account=1' },
        { type: 'CAA', flags: 128, tag: 'TBS', value: 'x' },
        // A tag named `critical` hides its flags in Node's answer: taken as critical either way.
        { type: 'CAA', flags: 0, tag: 'critical', value: 'y' },
      ]);
      expect(await resolver.caa('caa.example.com')).toEqual([
        { critical: false, tag: 'issue', value: 'ca.example; account=1' },
        { critical: true, tag: 'tbs', value: 'x' },
        { critical: true, tag: 'critical', value: 'y' },
      ]);
    },
    TIMEOUT,
  );

  it(
    'ok/addresses are A and AAAA',
    async () => {
      dns.set('host.example.com', [
        { type: 'A', address: '192.0.2.7' },
        { type: 'AAAA', address: '2001:db8::7' },
      ]);
      dns.set('v4.example.com', [{ type: 'A', address: '10.0.0.1' }]);
      expect(await resolver.addresses('host.example.com')).toEqual(['192.0.2.7', '2001:db8::7']);
      expect(await resolver.addresses('v4.example.com')).toEqual(['10.0.0.1']);
    },
    TIMEOUT,
  );

  it(
    'ok/a name that cannot exist in DNS has no records (no query)',
    async () => {
      expect(await resolver.txt(`${'a'.repeat(64)}.example.com`)).toEqual([]);
    },
    TIMEOUT,
  );
});

describe('lookupsOnce', () => {
  it(
    'ok/each question of one order goes out once: TXT of www.x and x, the CAA climbs of both names',
    async () => {
      dns.set('shop.example.com', [
        { type: 'TXT', data: 'token' },
        { type: 'CAA', flags: 0, tag: 'issue', value: US[0]! },
      ]);
      const before = dns.answered();
      const once = lookupsOnce(resolver);
      const txt = await Promise.all([
        checkDnsTxt(once, 'shop.example.com', 'token'),
        checkDnsTxt(once, 'SHOP.example.com.', 'token'),
      ]);
      expect(txt.map((r) => r.ok)).toEqual([true, true]);
      for (const name of ['www.shop.example.com', 'shop.example.com'])
        expect(await checkCaa(once, name, US)).toEqual({ permitted: true, relevant: 'shop.example.com' });
      // TXT at the name (it matches: _dnsauth.<name> is not asked); CAA at every level of the climb
      // from www.shop.example.com, asked at once: www.shop.example.com, shop.example.com, example.com, com.
      expect(dns.answered() - before).toBe(5);
      // Nothing is kept beyond the one order: the next one asks again and sees a changed record.
      dns.set('shop.example.com', [{ type: 'CAA', flags: 0, tag: 'issue', value: 'other.example' }]);
      expect(await checkCaa(lookupsOnce(resolver), 'shop.example.com', US)).toMatchObject({ permitted: false });
      expect(await checkCaa(once, 'shop.example.com', US)).toMatchObject({ permitted: true });
    },
    TIMEOUT,
  );

  it(
    'fail/a question that fails fails alike for every check that shares it, and is asked once',
    async () => {
      const calls: string[] = [];
      const failing = lookupsOnce({
        txt: async (n) => {
          calls.push(n);
          throw new DnsLookupError('ETIMEOUT', 'TXT', n);
        },
        cname: async () => null,
        caa: async () => [],
        addresses: async () => [],
      });
      const results = await Promise.all([
        checkDnsTxt(failing, 'a.example.com', 'v'),
        checkDnsTxt(failing, 'a.example.com', 'v'),
      ]);
      expect(results).toEqual([
        expect.objectContaining({ ok: false, transient: true }),
        expect.objectContaining({ ok: false, transient: true }),
      ]);
      expect(calls.sort()).toEqual(['_dnsauth.a.example.com', 'a.example.com']);
    },
    TIMEOUT,
  );
});

describe('checkDnsTxt', () => {
  const TOKEN = 'k3Jx9-token-Value_01';

  it(
    'ok/TXT at the name, among other records',
    async () => {
      dns.set('txt-ok.example.com', [
        { type: 'TXT', data: 'v=spf1 -all' },
        { type: 'TXT', data: ` ${TOKEN} ` },
      ]);
      expect(await checkDnsTxt(resolver, 'txt-ok.example.com', TOKEN)).toEqual({ ok: true, via: 'txt-ok.example.com' });
    },
    TIMEOUT,
  );

  it(
    'ok/TXT at _dnsauth.<name>',
    async () => {
      dns.set('_dnsauth.dnsauth.example.com', [{ type: 'TXT', data: TOKEN }]);
      expect(await checkDnsTxt(resolver, 'DNSAUTH.example.com.', ` ${TOKEN}\n`)).toEqual({
        ok: true,
        via: '_dnsauth.dnsauth.example.com',
      });
    },
    TIMEOUT,
  );

  it('ok/the name unanswered, the token at _dnsauth.<name>: proven; the other way round: asked again later', async () => {
    const asked: string[] = [];
    const lookups = (answers: Record<string, string[] | 'timeout'>) => ({
      txt: async (n: string) => {
        asked.push(n);
        const a = answers[n];
        if (a === 'timeout') throw new DnsLookupError('ETIMEOUT', 'TXT', n);
        return a ?? [];
      },
      cname: async () => null,
      caa: async () => [],
      addresses: async () => [],
    });
    expect(
      await checkDnsTxt(lookups({ 'x.example': 'timeout', '_dnsauth.x.example': [TOKEN] }), 'x.example', TOKEN),
    ).toEqual({ ok: true, via: '_dnsauth.x.example' });
    expect(
      await checkDnsTxt(lookups({ 'x.example': ['other'], '_dnsauth.x.example': 'timeout' }), 'x.example', TOKEN),
    ).toMatchObject({ ok: false, transient: true });
    expect(asked).toEqual(['x.example', '_dnsauth.x.example', 'x.example', '_dnsauth.x.example']);
  });

  it(
    'ok/long TXT (> 255 bytes) split over strings',
    async () => {
      const long = `${TOKEN}-${'z'.repeat(400)}`;
      dns.set('long-token.example.com', [{ type: 'TXT', data: long }]);
      expect(await checkDnsTxt(resolver, 'long-token.example.com', long)).toEqual({
        ok: true,
        via: 'long-token.example.com',
      });
    },
    TIMEOUT,
  );

  it(
    'fail/wrong value (comparison is case-sensitive), names what was found',
    async () => {
      dns.set('wrong.example.com', [{ type: 'TXT', data: TOKEN.toUpperCase() }]);
      const result = await checkDnsTxt(resolver, 'wrong.example.com', TOKEN);
      expect(result.ok).toBe(false);
      if (result.ok) return;
      expect(result.transient).toBe(false);
      expect(result.problem).toContain('wrong.example.com');
      expect(result.problem).toContain(JSON.stringify(TOKEN.toUpperCase()));
    },
    TIMEOUT,
  );

  it(
    'fail/missing everywhere',
    async () => {
      const result = await checkDnsTxt(resolver, 'missing.example.com', TOKEN);
      expect(result).toEqual({
        ok: false,
        transient: false,
        problem:
          'No TXT record at missing.example.com or _dnsauth.missing.example.com has the expected value (there are no TXT records).',
      });
    },
    TIMEOUT,
  );

  it(
    'fail/record at the wrong place (a parent) does not count',
    async () => {
      dns.set('example.org', [{ type: 'TXT', data: TOKEN }]);
      expect((await checkDnsTxt(resolver, 'www.example.org', TOKEN)).ok).toBe(false);
    },
    TIMEOUT,
  );

  it(
    'fail/a long value does not match its first 255-byte string',
    async () => {
      const long = `${TOKEN}${'q'.repeat(300)}`;
      dns.set('prefix.example.com', [{ type: 'TXT', data: long }]);
      expect((await checkDnsTxt(resolver, 'prefix.example.com', long.slice(0, 255))).ok).toBe(false);
    },
    TIMEOUT,
  );

  it(
    'fail/an empty expected value never matches, not even an empty record',
    async () => {
      dns.set('empty.example.com', [{ type: 'TXT', data: '' }]);
      const result = await checkDnsTxt(resolver, 'empty.example.com', '  ');
      expect(result).toMatchObject({ ok: false, transient: false });
    },
    TIMEOUT,
  );
});

describe('checkDnsCname', () => {
  const HASH = '0123456789ABCDEF0123456789ABCDEF';
  const ALIAS = `_${HASH.toLowerCase()}`;
  const TARGET = 'aaaa1111.bbbb2222.k3jx9.sectigo.com';

  it(
    'ok/right target',
    async () => {
      dns.set(`${ALIAS}.cname.example.com`, [{ type: 'CNAME', target: TARGET }]);
      expect(await checkDnsCname(resolver, 'cname.example.com', HASH, TARGET)).toEqual({
        ok: true,
        via: `${ALIAS}.cname.example.com`,
      });
    },
    TIMEOUT,
  );

  it(
    'ok/trailing dot on either side',
    async () => {
      dns.set(`${ALIAS}.dot.example.com`, [{ type: 'CNAME', target: `${TARGET}.` }]);
      expect((await checkDnsCname(resolver, 'dot.example.com', HASH, TARGET)).ok).toBe(true);
      expect((await checkDnsCname(resolver, 'dot.example.com.', HASH.toLowerCase(), `${TARGET}.`)).ok).toBe(true);
    },
    TIMEOUT,
  );

  it(
    'ok/upper case in the record, the target and the name',
    async () => {
      dns.set(`${ALIAS}.upper.example.com`, [{ type: 'CNAME', target: TARGET.toUpperCase() }]);
      expect((await checkDnsCname(resolver, 'UPPER.Example.com', HASH, 'AaAa1111.BBBB2222.k3jx9.Sectigo.COM')).ok).toBe(
        true,
      );
    },
    TIMEOUT,
  );

  it(
    'fail/wrong target names both',
    async () => {
      dns.set(`${ALIAS}.wrong.example.com`, [{ type: 'CNAME', target: 'other.sectigo.com' }]);
      expect(await checkDnsCname(resolver, 'wrong.example.com', HASH, TARGET)).toEqual({
        ok: false,
        transient: false,
        problem: `The CNAME record at ${ALIAS}.wrong.example.com points to other.sectigo.com, not to ${TARGET}.`,
      });
    },
    TIMEOUT,
  );

  it(
    'fail/missing CNAME, or a TXT where the CNAME should be',
    async () => {
      expect(await checkDnsCname(resolver, 'none.example.com', HASH, TARGET)).toMatchObject({
        ok: false,
        transient: false,
      });
      dns.set(`${ALIAS}.txt.example.com`, [{ type: 'TXT', data: TARGET }]);
      expect(await checkDnsCname(resolver, 'txt.example.com', HASH, TARGET)).toMatchObject({
        ok: false,
        transient: false,
      });
    },
    TIMEOUT,
  );

  it(
    'fail/CNAME under another hash label',
    async () => {
      dns.set(`_ffffffffffffffffffffffffffffffff.hash.example.com`, [{ type: 'CNAME', target: TARGET }]);
      expect((await checkDnsCname(resolver, 'hash.example.com', HASH, TARGET)).ok).toBe(false);
    },
    TIMEOUT,
  );

  it(
    'fail/empty or malformed inputs never match',
    async () => {
      dns.set(`${ALIAS}.bad.example.com`, [{ type: 'CNAME', target: TARGET }]);
      expect(await checkDnsCname(resolver, 'bad.example.com', '', TARGET)).toMatchObject({
        ok: false,
        transient: false,
      });
      expect(await checkDnsCname(resolver, 'bad.example.com', 'a.b', TARGET)).toMatchObject({
        ok: false,
        transient: false,
      });
      expect(await checkDnsCname(resolver, 'bad.example.com', HASH, ' . ')).toMatchObject({
        ok: false,
        transient: false,
      });
    },
    TIMEOUT,
  );
});

describe('checkCaa', () => {
  const caa = (tag: string, value: string, flags = 0) => ({ type: 'CAA' as const, flags, tag, value });

  it('ok/every level is asked at once; a failure above the relevant set is not looked at, one below it is transient', async () => {
    const asked: string[] = [];
    let release!: () => void;
    const answered = new Promise<void>((r) => (release = r));
    const zone: Record<string, CaaRecord[] | 'fail'> = {
      'a.b.example.com': [],
      'b.example.com': [{ critical: false, tag: 'issue', value: US[0]! }],
      'example.com': 'fail',
      com: 'fail',
    };
    const lookups: DnsLookups = {
      txt: async () => [],
      cname: async () => null,
      addresses: async () => [],
      caa: async (n) => {
        asked.push(n);
        await answered;
        const records = zone[n] ?? [];
        if (records === 'fail') throw new DnsLookupError('ESERVFAIL', 'CAA', n);
        return records;
      },
    };
    const result = checkCaa(lookups, 'a.b.example.com', US);
    // Before any answer has come, all four questions are out.
    await new Promise((r) => setImmediate(r));
    expect(asked).toEqual(['a.b.example.com', 'b.example.com', 'example.com', 'com']);
    release();
    expect(await result).toEqual({ permitted: true, relevant: 'b.example.com' });

    zone['b.example.com'] = 'fail';
    zone['example.com'] = [{ critical: false, tag: 'issue', value: US[0]! }];
    expect(await checkCaa(lookups, 'a.b.example.com', US)).toMatchObject({ permitted: false, transient: true });
  });

  it(
    'ok/no CAA anywhere: permitted',
    async () => {
      dns.set('www.nocaa.example.com', [{ type: 'A', address: '192.0.2.1' }]);
      expect(await checkCaa(resolver, 'www.nocaa.example.com', US)).toEqual({ permitted: true, relevant: null });
      expect(await checkCaa(resolver, '*.nocaa.example.com', US)).toEqual({ permitted: true, relevant: null });
    },
    TIMEOUT,
  );

  it(
    'ok/issue for us (parameters ignored)',
    async () => {
      dns.set('us.example.com', [
        caa('issue', 'trustpoint.certdesk.test; accounturi=https://x.test/acct/1; validationmethods=dns-01'),
      ]);
      expect(await checkCaa(resolver, 'us.example.com', US)).toEqual({ permitted: true, relevant: 'us.example.com' });
    },
    TIMEOUT,
  );

  it(
    'fail/issue for another CA: forbidden, problem names the relevant name',
    async () => {
      dns.set('other.example.com', [caa('issue', 'letsencrypt.org')]);
      const result = await checkCaa(resolver, 'other.example.com', US);
      expect(result).toMatchObject({ permitted: false, relevant: 'other.example.com' });
      expect(result.permitted === false && result.problem).toContain('other.example.com');
      expect(result.permitted === false && result.problem).toContain('letsencrypt.org');
    },
    TIMEOUT,
  );

  it(
    'ok/fail: the set at a parent is found by climbing',
    async () => {
      dns.set('climb.co.uk', [caa('issue', 'trustpoint.certdesk.test')]);
      dns.set('forbid.co.uk', [caa('issue', 'digicert.com')]);
      expect(await checkCaa(resolver, 'a.b.climb.co.uk', US)).toEqual({ permitted: true, relevant: 'climb.co.uk' });
      expect(await checkCaa(resolver, 'www.forbid.co.uk', US)).toMatchObject({
        permitted: false,
        relevant: 'forbid.co.uk',
      });
    },
    TIMEOUT,
  );

  it(
    'ok/climbing stops at the first non-empty set (a permitting child beats a forbidding parent)',
    async () => {
      dns.set('stop.example.net', [caa('issue', 'digicert.com')]);
      dns.set('shop.stop.example.net', [caa('issue', 'trustpoint.certdesk.test')]);
      expect(await checkCaa(resolver, 'www.shop.stop.example.net', US)).toEqual({
        permitted: true,
        relevant: 'shop.stop.example.net',
      });
      dns.set('shop.stop.example.net', [caa('issue', 'digicert.com')]);
      dns.set('stop.example.net', [caa('issue', 'trustpoint.certdesk.test')]);
      expect(await checkCaa(resolver, 'www.shop.stop.example.net', US)).toMatchObject({
        permitted: false,
        relevant: 'shop.stop.example.net',
      });
    },
    TIMEOUT,
  );

  it(
    'fail/issuewild forbids a wildcard while issue permits the base name',
    async () => {
      dns.set('wild.example.com', [caa('issue', 'trustpoint.certdesk.test'), caa('issuewild', ';')]);
      expect(await checkCaa(resolver, 'wild.example.com', US)).toEqual({
        permitted: true,
        relevant: 'wild.example.com',
      });
      expect(await checkCaa(resolver, 'www.wild.example.com', US)).toEqual({
        permitted: true,
        relevant: 'wild.example.com',
      });
      const result = await checkCaa(resolver, '*.wild.example.com', US);
      expect(result).toMatchObject({ permitted: false, relevant: 'wild.example.com' });
      expect(result.permitted === false && result.problem).toContain('issuewild');
    },
    TIMEOUT,
  );

  it(
    'ok/issuewild for us permits a wildcard even where issue names another CA',
    async () => {
      dns.set('wild2.example.com', [caa('issue', 'digicert.com'), caa('issuewild', 'trustpoint.certdesk.test')]);
      expect(await checkCaa(resolver, '*.wild2.example.com', US)).toEqual({
        permitted: true,
        relevant: 'wild2.example.com',
      });
      expect(await checkCaa(resolver, 'wild2.example.com', US)).toMatchObject({ permitted: false });
    },
    TIMEOUT,
  );

  it(
    'ok/fail: without issuewild a wildcard follows issue',
    async () => {
      dns.set('wild3.example.com', [caa('issue', 'trustpoint.certdesk.test')]);
      dns.set('wild4.example.com', [caa('issue', 'digicert.com')]);
      expect(await checkCaa(resolver, '*.wild3.example.com', US)).toEqual({
        permitted: true,
        relevant: 'wild3.example.com',
      });
      expect(await checkCaa(resolver, '*.wild4.example.com', US)).toMatchObject({
        permitted: false,
        relevant: 'wild4.example.com',
      });
    },
    TIMEOUT,
  );

  it(
    'fail/";" forbids everyone',
    async () => {
      dns.set('none.example.com', [caa('issue', ';')]);
      dns.set('none2.example.com', [caa('issue', ' ; ')]);
      expect(await checkCaa(resolver, 'none.example.com', US)).toMatchObject({
        permitted: false,
        relevant: 'none.example.com',
      });
      expect(await checkCaa(resolver, 'none2.example.com', US)).toMatchObject({
        permitted: false,
        relevant: 'none2.example.com',
      });
    },
    TIMEOUT,
  );

  it(
    'fail/an empty issue value (issue "") is never read as permission',
    async () => {
      // RFC 8659 allows the empty value (it forbids like ";"); node's c-ares rejects such a record
      // as a bad response (EBADRESP), so the check fails closed as transient.
      dns.set('emptyvalue.example.com', [caa('issue', '')]);
      expect(await checkCaa(resolver, 'emptyvalue.example.com', US)).toMatchObject({ permitted: false });
    },
    TIMEOUT,
  );

  it(
    'ok/";" beside an issue for us: any issue property naming us permits',
    async () => {
      dns.set('mixed.example.com', [caa('issue', ';'), caa('issue', 'trustpoint.certdesk.test')]);
      expect(await checkCaa(resolver, 'mixed.example.com', US)).toEqual({
        permitted: true,
        relevant: 'mixed.example.com',
      });
    },
    TIMEOUT,
  );

  it(
    'fail/a malformed issue value authorizes no one',
    async () => {
      dns.set('malformed.example.com', [caa('issue', 'trustpoint.certdesk.test extra')]);
      expect(await checkCaa(resolver, 'malformed.example.com', US)).toMatchObject({ permitted: false });
    },
    TIMEOUT,
  );

  it(
    'fail/critical unknown tag (flags 128) forbids, even beside an issue for us',
    async () => {
      dns.set('crit.example.com', [caa('issue', 'trustpoint.certdesk.test'), caa('tbs', 'unknown', 128)]);
      const result = await checkCaa(resolver, 'crit.example.com', US);
      expect(result).toMatchObject({ permitted: false, relevant: 'crit.example.com' });
      expect(result.permitted === false && result.problem).toContain('"tbs"');
    },
    TIMEOUT,
  );

  it(
    'ok/non-critical unknown tag is ignored; critical known tag is fine; reserved flag bits ignored',
    async () => {
      dns.set('noncrit.example.com', [caa('issue', 'trustpoint.certdesk.test'), caa('tbs', 'unknown', 0)]);
      dns.set('onlyunknown.example.com', [caa('tbs', 'unknown', 1)]);
      dns.set('critknown.example.com', [
        caa('issue', 'trustpoint.certdesk.test', 128),
        caa('iodef', 'mailto:sec@critknown.example.com', 128),
      ]);
      expect(await checkCaa(resolver, 'noncrit.example.com', US)).toEqual({
        permitted: true,
        relevant: 'noncrit.example.com',
      });
      expect(await checkCaa(resolver, 'onlyunknown.example.com', US)).toEqual({
        permitted: true,
        relevant: 'onlyunknown.example.com',
      });
      expect(await checkCaa(resolver, 'critknown.example.com', US)).toEqual({
        permitted: true,
        relevant: 'critknown.example.com',
      });
    },
    TIMEOUT,
  );

  it(
    'ok/a set with only iodef does not restrict issuance',
    async () => {
      dns.set('iodef.example.com', [caa('iodef', 'mailto:sec@iodef.example.com')]);
      expect(await checkCaa(resolver, 'iodef.example.com', US)).toEqual({
        permitted: true,
        relevant: 'iodef.example.com',
      });
    },
    TIMEOUT,
  );

  it(
    'ok/fail: tags and issuer domains are case-insensitive',
    async () => {
      dns.set('case.example.com', [caa('ISSUE', 'TrustPoint.CertDesk.TEST.'), caa('IssueWild', ';')]);
      expect(await checkCaa(resolver, 'Case.Example.com', US)).toEqual({
        permitted: true,
        relevant: 'case.example.com',
      });
      expect(await checkCaa(resolver, '*.case.example.com', US)).toMatchObject({
        permitted: false,
        relevant: 'case.example.com',
      });
      expect(await checkCaa(resolver, 'case.example.com', ['TRUSTPOINT.certdesk.test'])).toMatchObject({
        permitted: true,
      });
    },
    TIMEOUT,
  );

  it(
    'ok/fail: a CNAME at the name is followed (node asks with RD; the server chains the alias)',
    async () => {
      // RFC 8659 §3: the CAA RRset of the name is the one its aliases resolve to.
      dns.set('cdn.example.com', [{ type: 'CNAME', target: 'edge.cdn-provider.net' }]);
      dns.set('edge.cdn-provider.net', [caa('issue', 'digicert.com')]);
      dns.set('example.com', [caa('issue', 'trustpoint.certdesk.test')]);
      expect(await checkCaa(resolver, 'cdn.example.com', US)).toMatchObject({
        permitted: false,
        relevant: 'cdn.example.com',
      });
      dns.set('edge.cdn-provider.net', [caa('issue', 'trustpoint.certdesk.test')]);
      dns.set('example.com', [caa('issue', 'digicert.com')]);
      expect(await checkCaa(resolver, 'cdn.example.com', US)).toEqual({ permitted: true, relevant: 'cdn.example.com' });
    },
    TIMEOUT,
  );

  it(
    'ok/fail: a CNAME target without CAA: the climb goes on from the parent of the name, not of the target',
    async () => {
      dns.set('cdn.example.com', [{ type: 'CNAME', target: 'edge.cdn-provider.net' }]);
      dns.set('edge.cdn-provider.net', [{ type: 'A', address: '192.0.2.9' }]);
      dns.set('cdn-provider.net', [caa('issue', 'digicert.com')]);
      dns.set('example.com', [caa('issue', 'trustpoint.certdesk.test')]);
      expect(await checkCaa(resolver, 'cdn.example.com', US)).toEqual({ permitted: true, relevant: 'example.com' });
      dns.set('example.com', [caa('issue', 'digicert.com')]);
      expect(await checkCaa(resolver, 'cdn.example.com', US)).toMatchObject({
        permitted: false,
        relevant: 'example.com',
      });
    },
    TIMEOUT,
  );
});

describe('discoverApprovers', () => {
  const constructed = (...names: string[]) =>
    names.flatMap((n) =>
      ['admin', 'administrator', 'webmaster', 'hostmaster', 'postmaster'].map((p) => ({
        ApproverEmail: `${p}@${n}`,
        ApproverType: 'Generic',
      })),
    );

  it(
    'ok/constructed for a 3-label name under a multi-label public suffix, most specific first',
    async () => {
      expect(await discoverApprovers(resolver, 'WWW.Shop.Example.co.uk.')).toEqual({
        domain: 'example.co.uk',
        approvers: constructed('www.shop.example.co.uk', 'shop.example.co.uk', 'example.co.uk'),
      });
    },
    TIMEOUT,
  );

  it(
    'ok/wildcard dropped; base domain alone',
    async () => {
      expect(await discoverApprovers(resolver, '*.shop.example.co.uk')).toEqual({
        domain: 'example.co.uk',
        approvers: constructed('shop.example.co.uk', 'example.co.uk'),
      });
      expect((await discoverApprovers(resolver, 'example.co.uk')).approvers).toEqual(constructed('example.co.uk'));
    },
    TIMEOUT,
  );

  it(
    'ok/TXT _validation-contactemail at the base domain',
    async () => {
      dns.set('_validation-contactemail.example.co.uk', [{ type: 'TXT', data: ' Security@Example.CO.UK ' }]);
      const { approvers } = await discoverApprovers(resolver, 'www.example.co.uk');
      expect(approvers).toEqual([
        ...constructed('www.example.co.uk', 'example.co.uk'),
        { ApproverEmail: 'security@example.co.uk', ApproverType: 'Domain' },
      ]);
    },
    TIMEOUT,
  );

  it(
    'ok/CAA contactemail at the base domain and on the climb',
    async () => {
      dns.set('example.co.uk', [
        { type: 'CAA', flags: 0, tag: 'issue', value: 'trustpoint.certdesk.test' },
        { type: 'CAA', flags: 0, tag: 'contactemail', value: 'caa-contact@example.co.uk' },
      ]);
      dns.set('shop.example.co.uk', [
        { type: 'CAA', flags: 0, tag: 'ContactEmail', value: 'shop-owner@mail.example.net' },
      ]);
      const { approvers } = await discoverApprovers(resolver, 'www.shop.example.co.uk');
      expect(approvers.filter((a) => a.ApproverType === 'Domain')).toEqual([
        { ApproverEmail: 'shop-owner@mail.example.net', ApproverType: 'Domain' },
        { ApproverEmail: 'caa-contact@example.co.uk', ApproverType: 'Domain' },
      ]);
      expect(approvers.slice(0, 15)).toEqual(
        constructed('www.shop.example.co.uk', 'shop.example.co.uk', 'example.co.uk'),
      );
    },
    TIMEOUT,
  );

  it(
    'ok/de-duplicated: a constructed address stays Generic, TXT and CAA give one Domain entry',
    async () => {
      dns.set('_validation-contactemail.example.co.uk', [
        { type: 'TXT', data: 'ADMIN@example.co.uk' },
        { type: 'TXT', data: 'dns@example.co.uk' },
        { type: 'TXT', data: 'dns@example.co.uk' },
      ]);
      dns.set('example.co.uk', [{ type: 'CAA', flags: 0, tag: 'contactemail', value: 'DNS@Example.co.uk' }]);
      const { approvers } = await discoverApprovers(resolver, 'example.co.uk');
      expect(approvers).toEqual([
        ...constructed('example.co.uk'),
        { ApproverEmail: 'dns@example.co.uk', ApproverType: 'Domain' },
      ]);
    },
    TIMEOUT,
  );

  it(
    'ok/invalid addresses in DNS are skipped',
    async () => {
      dns.set('_validation-contactemail.example.co.uk', [
        { type: 'TXT', data: 'not an address' },
        { type: 'TXT', data: 'two@@example.co.uk' },
        { type: 'TXT', data: 'user@-bad-.example' },
        { type: 'TXT', data: 'user@localhost' },
        { type: 'TXT', data: '.dot@example.co.uk' },
        { type: 'TXT', data: 'good@example.co.uk' },
      ]);
      dns.set('example.co.uk', [
        { type: 'CAA', flags: 0, tag: 'contactemail', value: 'mailto:x@example.co.uk' },
        { type: 'CAA', flags: 0, tag: 'contactemail', value: 'x@y@example.co.uk' },
      ]);
      const { approvers } = await discoverApprovers(resolver, 'example.co.uk');
      expect(approvers.filter((a) => a.ApproverType === 'Domain')).toEqual([
        { ApproverEmail: 'good@example.co.uk', ApproverType: 'Domain' },
      ]);
    },
    TIMEOUT,
  );

  it(
    'fail/a name without a registered domain is refused',
    async () => {
      await expect(discoverApprovers(resolver, 'co.uk')).rejects.toBeInstanceOf(CertdeskError);
      await expect(discoverApprovers(resolver, 'host.corp')).rejects.toMatchObject({ kind: 'invalidName' });
    },
    TIMEOUT,
  );
});

describe('lookups that cannot be answered are transient, never "ok"', () => {
  let silent: Socket;
  let silentPort: number;
  let servfail: DnsServer;
  let servfailPort: number;
  let closed: RefusedPort;

  beforeAll(async () => {
    // A UDP socket that reads queries and never answers: every lookup times out.
    silent = createSocket('udp4');
    await new Promise<void>((resolve) => silent.bind(0, '127.0.0.1', resolve));
    silentPort = silent.address().port;
    // A closed port: the kernel refuses the datagrams (held, so no server started meanwhile gets it).
    closed = await refusedUdpPort();
    servfail = createServer({
      udp: true,
      // SERVFAIL for every name but two, which let one of checkDnsTxt's lookups succeed.
      handle: (request, send) => {
        const response = Packet.createResponseFromRequest(request);
        const name = request.questions[0]?.name ?? '';
        if (name === 'partial-ok.example.com' && request.questions[0]?.type === Packet.TYPE.TXT) {
          response.answers.push(
            new Packet.Resource({ name, type: Packet.TYPE.TXT, class: Packet.CLASS.IN, ttl: 0, data: ['token'] }),
          );
        } else if (name === 'partial-missing.example.com') {
          response.header.rcode = 3; // NXDOMAIN
        } else {
          response.header.rcode = 2; // SERVFAIL
        }
        void send(response);
      },
    });
    const addresses = await servfail.listen({ udp: { port: 0, address: '127.0.0.1' } });
    servfailPort = addresses.udp?.port ?? 0;
  });
  afterAll(async () => {
    await closed?.close();
    silent?.close();
    await servfail?.close();
  });

  const cases = (): [string, () => DcvResolver, RegExp][] => [
    [
      'closed port',
      () => new DcvResolver({ servers: [`127.0.0.1:${closed.port}`], timeoutMs: 200, tries: 1 }),
      /^(ECONNREFUSED|ETIMEOUT)$/,
    ],
    [
      'silent server',
      () => new DcvResolver({ servers: [`127.0.0.1:${silentPort}`], timeoutMs: 200, tries: 1 }),
      /^ETIMEOUT$/,
    ],
    [
      'SERVFAIL',
      () => new DcvResolver({ servers: [`127.0.0.1:${servfailPort}`], timeoutMs: 500, tries: 1 }),
      /^ESERVFAIL$/,
    ],
  ];

  it('fail/every lookup throws DnsLookupError with the code', async () => {
    for (const [label, make, code] of cases()) {
      const r = make();
      for (const lookup of [
        () => r.txt('example.com'),
        () => r.cname('example.com'),
        () => r.caa('example.com'),
        () => r.addresses('example.com'),
      ]) {
        const err: unknown = await lookup().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err, label).toBeInstanceOf(DnsLookupError);
        expect((err as DnsLookupError).code, label).toMatch(code);
        expect((err as DnsLookupError).message, label).toContain('example.com');
      }
    }
  }, 60_000);

  it('fail/checks report transient problems', async () => {
    for (const [label, make] of cases()) {
      const r = make();
      expect(await checkDnsTxt(r, 'example.com', 'token'), label).toMatchObject({ ok: false, transient: true });
      expect(await checkDnsCname(r, 'example.com', 'abcdef', 'x.sectigo.com'), label).toMatchObject({
        ok: false,
        transient: true,
      });
      const caa = await checkCaa(r, 'www.example.com', US);
      expect(caa, label).toMatchObject({ permitted: false, transient: true });
      await expect(discoverApprovers(r, 'www.example.com'), label).rejects.toBeInstanceOf(DnsLookupError);
    }
  }, 60_000);

  it("ok/fail: one of the TXT check's two lookups unanswered: a match still counts, else transient", async () => {
    const r = new DcvResolver({ servers: [`127.0.0.1:${servfailPort}`], timeoutMs: 500, tries: 1 });
    expect(await checkDnsTxt(r, 'partial-ok.example.com', 'token')).toEqual({
      ok: true,
      via: 'partial-ok.example.com',
    });
    const result = await checkDnsTxt(r, 'partial-missing.example.com', 'token');
    expect(result).toMatchObject({ ok: false, transient: true });
    expect(!result.ok && result.problem).toContain('_dnsauth.partial-missing.example.com');
  }, 60_000);
});
