import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import { parse } from 'tldts';

/** Outcome of a name check: a refused name is a value with the reason, not an exception. */
export type NameCheck = { ok: true; name: string } | { ok: false; problem: string };

/** Inputs longer than this are refused before any parsing (a DNS name has at most 253). */
const MAX_INPUT_CHARS = 1024;
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * Reserved and special-use names, in the entry syntax of `isBlockedName`: RFC 2606 and RFC
 * 6761/6762, `.onion` (RFC 7686; the Baseline Requirements allow it only with validation methods
 * of their own, which certdesk does not offer), `.arpa` (the reverse zones of RFC 6761 §6.1 and
 * `home.arpa` of RFC 8375: the public suffix list holds them as ordinary suffixes), `.alt` (RFC
 * 9476) and `.internal` (ICANN's private-use TLD). The single-label ones are written `*.test`
 * (everything under the reserved TLD): as bare labels they would also block ordinary names such
 * as `test.example.de` or `local.shop.com`.
 */
export const DEFAULT_BLOCKED_NAMES: readonly string[] = Object.freeze([
  'example.com',
  'example.net',
  'example.org',
  '*.example',
  '*.test',
  '*.invalid',
  '*.localhost',
  '*.local',
  '*.onion',
  '*.arpa',
  '*.alt',
  '*.internal',
]);

/**
 * Normalizes a DNS name (trim, lower-case, one trailing dot dropped, IDN → punycode) and checks
 * its syntax only: LDH labels of 1–63 octets without leading or trailing hyphen (RFC 1035, RFC
 * 5890), at most 253 octets, at least two labels, a TLD that is not all digits, no IP literal,
 * and `*.` only as the whole leftmost label when `allowWildcard`. The public suffix list is not
 * consulted (see `checkDnsName`). Returns the normalized name or the problem; never throws.
 */
export function checkDnsSyntax(input: string, opts: { allowWildcard: boolean }): NameCheck {
  if (typeof input !== 'string') return fail('The name must be a string.');
  if (input.length > MAX_INPUT_CHARS) return fail('The name is too long.');
  let name = input.trim().toLowerCase();
  if (name.endsWith('.')) name = name.slice(0, -1);
  if (name === '') return fail('The name is empty.');
  const shown = JSON.stringify(name);
  if (isIP(name) !== 0 || (name.startsWith('[') && name.endsWith(']'))) {
    return fail(`${shown} is an IP address, not a DNS name.`);
  }
  const wildcard = name.startsWith('*.');
  if (wildcard && !opts.allowWildcard) return fail(`${shown}: wildcard names are not allowed here.`);
  const rest = wildcard ? name.slice(2) : name;
  if (rest.includes('*')) return fail(`${shown}: a wildcard is allowed only as the whole leftmost label ("*.").`);
  // ASCII is limited to LDH and dots here: domainToASCII would otherwise percent-decode,
  // drop some characters and turn forms like 0x7f.1 into 127.0.0.1 without a word.
  // eslint-disable-next-line no-control-regex -- the whole ASCII range, NUL included, is meant
  const badAscii = /[\x00-\x7f]/.exec(rest.replace(/[a-z0-9.-]/g, ''));
  if (badAscii)
    return fail(`${shown} contains the character ${JSON.stringify(badAscii[0])}, not allowed in a DNS name.`);
  // Checked before conversion too: the WHATWG host parser refuses names ending in a number.
  if (/(?:^|\.)[0-9]+$/.test(rest)) return fail(`${shown} has an all-numeric top-level domain.`);
  const ascii = domainToASCII(rest);
  if (ascii === '') return fail(`${shown} is not a valid internationalized domain name.`);
  if (isIP(ascii) !== 0) return fail(`${shown} is an IP address, not a DNS name.`);
  const full = wildcard ? `*.${ascii}` : ascii;
  if (full.length > 253) return fail(`${shown} is longer than 253 characters.`);
  const labels = ascii.split('.');
  for (const label of labels) {
    if (label === '') return fail(`${shown} has an empty label.`);
    if (label.length > 63) return fail(`${shown} has a label longer than 63 characters.`);
    if (label.startsWith('-') || label.endsWith('-'))
      return fail(`${shown} has a label that starts or ends with a hyphen.`);
    if (!LABEL.test(label)) return fail(`${shown} has a label with characters other than letters, digits and hyphens.`);
  }
  if (labels.length < 2) return fail(`${shown} is not a fully qualified domain name.`);
  if (/^[0-9]+$/.test(labels[labels.length - 1] ?? '')) return fail(`${shown} has an all-numeric top-level domain.`);
  return { ok: true, name: full };
}

/**
 * `checkDnsSyntax`, then the public suffix list (ICANN and private sections): the name must end
 * in a known public suffix (no internal names such as `host.corp`) and must not itself be one
 * (`co.uk`, `github.io`, `*.co.uk`). Returns the normalized name or the problem; never throws.
 */
export function checkDnsName(input: string, opts: { allowWildcard: boolean }): NameCheck {
  const syntax = checkDnsSyntax(input, opts);
  if (!syntax.ok) return syntax;
  const name = syntax.name;
  const host = name.startsWith('*.') ? name.slice(2) : name;
  const psl = parse(host, { allowPrivateDomains: true, extractHostname: false });
  if (!psl.isIcann && !psl.isPrivate) {
    return fail(`${JSON.stringify(name)} does not end in a public top-level domain (internal names are not allowed).`);
  }
  if (!psl.domain) return fail(`${JSON.stringify(name)} is a public suffix, not a registrable domain name.`);
  return { ok: true, name };
}

/**
 * Whether `name` is covered by an entry of `blockList`. Entries (case-insensitive, trailing dot
 * ignored): `example.com` blocks that name and every name under it; `*.example.com` blocks only
 * names under it (a wildcard name `*.example.com` counts as under it); a bare label such as
 * `paypal` blocks every name having a label equal to it. A wildcard name is blocked too where it
 * would cover a blocked name: `*.example.com` by the entry `login.example.com` (as Boulder does).
 * Pure; never throws.
 */
export function isBlockedName(name: string, blockList: readonly string[]): boolean {
  const wanted = normalize(name);
  const wildcard = wanted.startsWith('*.');
  const host = wildcard ? wanted.slice(2) : wanted;
  const labels = host.split('.');
  return blockList.some((raw) => {
    const entry = normalize(raw);
    if (entry === '' || entry === '*.' || entry === '*') return false;
    if (entry.startsWith('*.')) {
      const parent = entry.slice(2);
      return host.endsWith(`.${parent}`) || (wildcard && host === parent);
    }
    if (!entry.includes('.')) return labels.includes(entry);
    if (wildcard && entry.slice(entry.indexOf('.') + 1) === host) return true;
    return host === entry || host.endsWith(`.${entry}`);
  });
}

function normalize(name: string): string {
  let n = String(name).trim().toLowerCase();
  if (n.endsWith('.')) n = n.slice(0, -1);
  // Compare IDNs in their punycode form, which is what checkDnsName hands on.
  // eslint-disable-next-line no-control-regex -- any non-ASCII character
  if (/[^\x00-\x7f]/.test(n)) {
    const wildcard = n.startsWith('*.');
    const ascii = domainToASCII(wildcard ? n.slice(2) : n);
    if (ascii !== '') n = wildcard ? `*.${ascii}` : ascii;
  }
  return n;
}

function fail(problem: string): NameCheck {
  return { ok: false, problem };
}
