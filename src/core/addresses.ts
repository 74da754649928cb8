// Which addresses a fetch made for a customer may reach: the one rule of DCV (FILE check) and of
// the TLS scanner, so neither can be pointed at the service's own network (SSRF).
import { isIP, isIPv6 } from 'node:net';

/**
 * Whether an address may be fetched: false for loopback, RFC 1918/6598/4193, link-local,
 * multicast, unspecified, broadcast, documentation, benchmarking and other reserved ranges, and
 * for IPv4-mapped, NAT64 (64:ff9b::/96) and 6to4 forms of those; also false for anything that is
 * not an IP address. IPv6 is public only inside global unicast 2000::/3. Pure; never throws.
 */
export function isPublicAddress(address: string): boolean {
  if (typeof address !== 'string') return false;
  const version = isIP(address);
  if (version === 4) return isPublicV4(ipv4Value(address));
  // A zone index only exists on link-scoped addresses.
  if (version !== 6 || address.includes('%')) return false;
  const g = ipv6Groups(address);
  if (g === undefined) return false;
  const embedded = ((g[6] ?? 0) * 0x10000 + (g[7] ?? 0)) >>> 0;
  if (inV6(g, MAPPED)) return isPublicV4(embedded);
  if (inV6(g, NAT64)) return isPublicV4(embedded);
  if (!inV6(g, GLOBAL_UNICAST)) return false;
  if (inV6(g, SIX_TO_FOUR)) return isPublicV4(((g[1] ?? 0) * 0x10000 + (g[2] ?? 0)) >>> 0);
  return !V6_RESERVED.some((range) => inV6(g, range));
}

/** IPv4 ranges that are not publicly routable (IANA special-purpose registry, RFC 6890). */
const V4_RESERVED = [
  '0.0.0.0/8', // "this network", unspecified
  '10.0.0.0/8', // RFC 1918
  '100.64.0.0/10', // RFC 6598 carrier-grade NAT
  '127.0.0.0/8', // loopback
  '169.254.0.0/16', // link-local
  '172.16.0.0/12', // RFC 1918
  '192.0.0.0/24', // IETF protocol assignments
  '192.0.2.0/24', // TEST-NET-1
  '192.88.99.0/24', // former 6to4 relay anycast
  '192.168.0.0/16', // RFC 1918
  '198.18.0.0/15', // benchmarking
  '198.51.100.0/24', // TEST-NET-2
  '203.0.113.0/24', // TEST-NET-3
  '224.0.0.0/4', // multicast
  '240.0.0.0/4', // reserved, 255.255.255.255 broadcast included
].map((cidr) => {
  const [base = '', bits = '0'] = cidr.split('/');
  return { base: ipv4Value(base), bits: Number(bits) };
});

interface V6Range {
  readonly groups: number[];
  readonly bits: number;
}
const v6 = (cidr: string): V6Range => {
  const [base = '', bits = '0'] = cidr.split('/');
  return { groups: ipv6Groups(base) ?? [], bits: Number(bits) };
};
const MAPPED = v6('::ffff:0:0/96');
const NAT64 = v6('64:ff9b::/96');
const GLOBAL_UNICAST = v6('2000::/3');
const SIX_TO_FOUR = v6('2002::/16');
/** Non-public ranges inside 2000::/3; everything outside it (::1, fc00::/7, fe80::/10, ff00::/8 …) is refused anyway. */
const V6_RESERVED = [
  v6('2001::/23'), // IETF protocol assignments: Teredo, benchmarking 2001:2::/48, ORCHID
  v6('2001:db8::/32'), // documentation
  v6('3fff::/20'), // documentation (RFC 9637)
];

function isPublicV4(value: number): boolean {
  return !V4_RESERVED.some(({ base, bits }) => bits === 0 || (value ^ base) >>> (32 - bits) === 0);
}

function ipv4Value(address: string): number {
  return address.split('.').reduce((acc, part) => acc * 256 + Number(part), 0) >>> 0;
}

/** The eight 16-bit groups of an IPv6 address already accepted by `isIP`. */
function ipv6Groups(address: string): number[] | undefined {
  let text = address.toLowerCase();
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  if (tail.includes('.')) {
    const value = ipv4Value(tail);
    text = `${text.slice(0, lastColon + 1)}${(value >>> 16).toString(16)}:${(value & 0xffff).toString(16)}`;
  }
  const parse = (part: string): number[] => (part === '' ? [] : part.split(':').map((h) => parseInt(h, 16)));
  const halves = text.split('::');
  const head = parse(halves[0] ?? '');
  if (halves.length === 1) return head.length === 8 ? head : undefined;
  const rest = parse(halves[1] ?? '');
  const zeros = 8 - head.length - rest.length;
  if (zeros < 0) return undefined;
  return [...head, ...new Array<number>(zeros).fill(0), ...rest];
}

function inV6(groups: number[], range: V6Range): boolean {
  for (let i = 0, left = range.bits; left > 0; i++, left -= 16) {
    const mask = left >= 16 ? 0xffff : (0xffff << (16 - left)) & 0xffff;
    if (((groups[i] ?? 0) & mask) !== ((range.groups[i] ?? 0) & mask)) return false;
  }
  return true;
}

/**
 * The client an address counts as for limits and throttles: IPv4 whole, IPv6 by its /64 (one
 * host usually holds a whole /64, and could rotate through it), IPv4-mapped IPv6 as IPv4.
 */
export function addressGroup(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped !== null) return mapped[1]!;
  if (!isIPv6(address)) return address;
  const [head = '', tail = ''] = address.toLowerCase().split('::');
  const left = head === '' ? [] : head.split(':');
  const right = address.includes('::') ? (tail === '' ? [] : tail.split(':')) : [];
  const groups = address.includes('::')
    ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right]
    : left;
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}
