import { Resolver } from 'node:dns/promises';
import { CertdeskError } from '../core/index.js';
import { baseDomain } from './base-domain.js';
import { checkDnsSyntax } from './names.js';

export interface DnsOptions {
  /** `host:port` (or bare host) entries as in CERTDESK_DNS_SERVERS; undefined or empty = system resolvers. */
  readonly servers?: readonly string[];
  /** First-try timeout per query; c-ares backs off on later tries. */
  readonly timeoutMs?: number;
  readonly tries?: number;
}

export interface CaaRecord {
  /** The issuer critical flag (bit 0, value 128); the reserved flag bits are ignored (RFC 8659 §4.1). */
  readonly critical: boolean;
  /** Lower-cased: tags are case-insensitive. */
  readonly tag: string;
  readonly value: string;
}

/** A lookup that could not be answered (SERVFAIL, timeout, refused): retry later, not a failure. */
export class DnsLookupError extends Error {
  /** node:dns's code, e.g. ESERVFAIL, ETIMEOUT, ECONNREFUSED. */
  readonly code: string;
  readonly rrtype: string;
  readonly hostname: string;

  constructor(code: string, rrtype: string, hostname: string, cause?: unknown) {
    super(
      `The DNS ${rrtype} lookup of ${hostname} could not be answered (${code}).`,
      cause === undefined ? undefined : { cause },
    );
    this.name = 'DnsLookupError';
    this.code = code;
    this.rrtype = rrtype;
    this.hostname = hostname;
  }
}

// Two tries of 2 s (c-ares doubles the second) keep a whole CAA climb well under a minute.
const DEFAULT_TIMEOUT_MS = 2000;
const DEFAULT_TRIES = 2;
/** Answers that mean "no such records": NXDOMAIN and NODATA. Every other error is transient. */
const EMPTY_CODES = new Set(['ENODATA', 'ENOTFOUND']);

/** A resolver for every DCV, CAA and approver lookup (CERTDESK_DNS_SERVERS: 'host:port' entries; undefined = system resolvers). */
export class DcvResolver {
  readonly #resolver: Resolver;

  constructor(options: DnsOptions = {}) {
    this.#resolver = new Resolver({
      timeout: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      tries: options.tries ?? DEFAULT_TRIES,
    });
    // setServers throws on a malformed entry: a configuration error, surfaced at construction.
    if (options.servers !== undefined && options.servers.length > 0) this.#resolver.setServers([...options.servers]);
  }

  /** The TXT records at `name`, each record's strings joined; [] for NXDOMAIN/NODATA. */
  async txt(name: string): Promise<string[]> {
    const records = await this.#lookup('TXT', name, (n) => this.#resolver.resolveTxt(n), []);
    return records.map((strings) => strings.join(''));
  }

  /** The CNAME target at `name` (lower-case, no trailing dot), or null. */
  async cname(name: string): Promise<string | null> {
    const targets = await this.#lookup('CNAME', name, (n) => this.#resolver.resolveCname(n), []);
    const first = targets[0];
    return first === undefined ? null : normalizeName(first);
  }

  /** The CAA RRset at `name` (aliases followed by the resolver); [] for NXDOMAIN/NODATA. */
  async caa(name: string): Promise<CaaRecord[]> {
    const records = await this.#lookup('CAA', name, (n) => this.#resolver.resolveCaa(n), []);
    return records.map(toCaaRecord);
  }

  /** A and AAAA addresses of `name` (the FILE check refuses private ones). */
  async addresses(name: string): Promise<string[]> {
    const [v4, v6] = await Promise.all([
      this.#lookup('A', name, (n) => this.#resolver.resolve4(n), []),
      this.#lookup('AAAA', name, (n) => this.#resolver.resolve6(n), []),
    ]);
    return [...v4, ...v6];
  }

  async #lookup<T>(rrtype: string, name: string, query: (name: string) => Promise<T>, empty: T): Promise<T> {
    const host = normalizeName(name);
    // A name that cannot be written in DNS cannot hold records; c-ares would fail with EBADNAME.
    if (!isQueryableName(host)) return empty;
    try {
      return await query(host);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'EUNKNOWN';
      if (EMPTY_CODES.has(code)) return empty;
      throw new DnsLookupError(code, rrtype, host, err);
    }
  }
}

/** node:dns hands a CAA record as `{ critical: flags, <tag>: value }`. */
function toCaaRecord(record: object): CaaRecord {
  const entries: [string, unknown][] = Object.entries(record);
  const flags = entries.find(([key]) => key === 'critical')?.[1];
  const entry = entries.find(([key]) => key !== 'critical');
  // A tag named `critical` takes the flags' place in Node's answer: an unknown tag whose flags are
  // lost counts as critical (RFC 8659 §4.1).
  if (entry === undefined && typeof flags === 'string') return { critical: true, tag: 'critical', value: flags };
  return {
    critical: typeof flags === 'number' && (flags & 0x80) !== 0,
    tag: (entry?.[0] ?? '').toLowerCase(),
    value: typeof entry?.[1] === 'string' ? entry[1] : '',
  };
}

/** What the checks ask of DNS: a `DcvResolver`, or `lookupsOnce` of one. */
export type DnsLookups = Pick<DcvResolver, 'txt' | 'cname' | 'caa' | 'addresses'>;

/**
 * The lookups of one order's checks, each question asked once, answers and failures shared: `www.x`
 * and `x` are proven by the same TXT records, and the CAA climbs of an order's names meet at their
 * parents. Meant for the moments one order is checked (POST /Order), never kept longer: nothing
 * is cached across orders, so a record changed since is seen by the next order.
 */
export function lookupsOnce(resolver: DnsLookups): DnsLookups {
  const asked = new Map<string, Promise<unknown>>();
  function once<T>(type: string, name: string, ask: (name: string) => Promise<T>): Promise<T> {
    const key = `${type} ${normalizeName(name)}`;
    let answer = asked.get(key) as Promise<T> | undefined;
    if (answer === undefined) {
      answer = ask(name);
      asked.set(key, answer);
    }
    return answer;
  }
  return {
    txt: (name) => once('TXT', name, (n) => resolver.txt(n)),
    cname: (name) => once('CNAME', name, (n) => resolver.cname(n)),
    caa: (name) => once('CAA', name, (n) => resolver.caa(n)),
    addresses: (name) => once('A/AAAA', name, (n) => resolver.addresses(n)),
  };
}

export type DnsCheckResult =
  | { readonly ok: true; readonly via: string }
  | { readonly ok: false; readonly problem: string; readonly transient: boolean };

/**
 * Token style (DESIGN §5.6): a TXT record equal to `expected` (trimmed, case-sensitive) at `name`,
 * or at `_dnsauth.<name>`. `name` is already mapped by the caller (leading www./*. dropped).
 * `via` is the name whose record matched. `_dnsauth.<name>` is asked only when `name` holds no
 * match: most proofs sit at the name, and one question is all they cost.
 */
export async function checkDnsTxt(resolver: DnsLookups, name: string, expected: string): Promise<DnsCheckResult> {
  const host = normalizeName(name);
  const wanted = expected.trim();
  // An empty token would match an empty TXT record: never a proof of control.
  if (wanted === '') return { ok: false, problem: 'There is no expected TXT value to compare with.', transient: false };
  const names = [host, `_dnsauth.${host}`];
  const found: string[] = [];
  let unanswered: DnsLookupError | undefined;
  for (const at of names) {
    let values: string[];
    try {
      values = await resolver.txt(at);
    } catch (e) {
      if (!(e instanceof DnsLookupError)) throw e;
      unanswered ??= e;
      continue;
    }
    if (values.some((v) => v.trim() === wanted)) return { ok: true, via: at };
    found.push(...values);
  }
  // One name unanswered: the token may be there, so this is a retry, not a failure.
  if (unanswered !== undefined) return { ok: false, problem: unanswered.message, transient: true };
  const seen = found.length === 0 ? 'there are no TXT records' : `found ${quoteSome(found)}`;
  return {
    ok: false,
    problem: `No TXT record at ${names.join(' or ')} has the expected value (${seen}).`,
    transient: false,
  };
}

/**
 * Hash style: a CNAME at `_<hashMd5 lower-case>.<name>` whose target equals `target`
 * (case-insensitive, trailing dot ignored). `via` is the name holding the CNAME.
 */
export async function checkDnsCname(
  resolver: DnsLookups,
  name: string,
  hashMd5: string,
  target: string,
): Promise<DnsCheckResult> {
  const label = hashMd5.trim().toLowerCase();
  const wanted = normalizeName(target);
  if (!/^[0-9a-z]+$/.test(label) || wanted === '') {
    return { ok: false, problem: 'The CNAME label or target to check is empty or malformed.', transient: false };
  }
  const alias = `_${label}.${normalizeName(name)}`;
  let actual: string | null;
  try {
    actual = await resolver.cname(alias);
  } catch (err) {
    if (err instanceof DnsLookupError) return { ok: false, problem: err.message, transient: true };
    throw err;
  }
  if (actual === wanted) return { ok: true, via: alias };
  const problem =
    actual === null
      ? `There is no CNAME record at ${alias}.`
      : `The CNAME record at ${alias} points to ${actual}, not to ${wanted}.`;
  return { ok: false, problem, transient: false };
}

export type CaaResult =
  | { readonly permitted: true; readonly relevant: string | null }
  | { readonly permitted: false; readonly relevant: string; readonly problem: string }
  | { readonly permitted: false; readonly transient: true; readonly problem: string };

/** Tags whose meaning this CA knows; a critical record with any other tag forbids issuance (RFC 8659 §4.1). */
const KNOWN_TAGS = new Set(['issue', 'issuewild', 'iodef', 'contactemail', 'contactphone', 'issuemail']);

/**
 * RFC 8659 §3: climb from `name` (wildcard '*.' removed for the lookup) towards the root until a
 * non-empty CAA RRset (every level asked at once); no set = permitted. `issuerDomains` are this
 * CA's identities (e.g. ['trustpoint.certdesk.test']). For a wildcard name use `issuewild` if
 * present in the relevant set, else `issue`. A critical flag on an unknown tag forbids. An `issue`
 * value is `domain; key=value…` (the issuer-domain-name counts, parameters are ignored); an empty
 * value (";") authorizes no one. Tags and domains are case-insensitive. A lookup that cannot be
 * answered is transient: never read as "no records" (that would permit).
 */
export async function checkCaa(
  resolver: DnsLookups,
  name: string,
  issuerDomains: readonly string[],
): Promise<CaaResult> {
  const fqdn = normalizeName(name);
  const wildcard = fqdn.startsWith('*.');
  const host = wildcard ? fqdn.slice(2) : fqdn;
  // Every level of the climb is asked at once (as Boulder does): one round trip instead of one per
  // label, and the questions share the resolver's socket. The answers are read in climbing order,
  // so the relevant set and a failure below it count exactly as in a climb one level at a time;
  // the answers above the relevant set are not looked at.
  const candidates = climb(host);
  const answers = candidates.map((candidate) =>
    resolver.caa(candidate).then(
      (records) => ({ records }),
      (error: unknown) => ({ error }),
    ),
  );
  let relevant: { name: string; records: CaaRecord[] } | undefined;
  for (const [i, candidate] of candidates.entries()) {
    const answer = await answers[i]!;
    if ('error' in answer) {
      if (answer.error instanceof DnsLookupError)
        return { permitted: false, transient: true, problem: answer.error.message };
      throw answer.error;
    }
    if (answer.records.length > 0) {
      relevant = { name: candidate, records: answer.records };
      break;
    }
  }
  if (relevant === undefined) return { permitted: true, relevant: null };

  const at = relevant.name;
  const critical = relevant.records.find((r) => r.critical && !KNOWN_TAGS.has(r.tag));
  if (critical !== undefined) {
    return {
      permitted: false,
      relevant: at,
      problem: `The CAA records at ${at} include the critical property ${JSON.stringify(critical.tag)}, unknown to this CA, which forbids issuance.`,
    };
  }
  // issuewild counts only for wildcard names, and only when the set has one (RFC 8659 §4.3).
  const wild = wildcard ? relevant.records.filter((r) => r.tag === 'issuewild') : [];
  const tag = wild.length > 0 ? 'issuewild' : 'issue';
  const properties = wild.length > 0 ? wild : relevant.records.filter((r) => r.tag === 'issue');
  if (properties.length === 0) return { permitted: true, relevant: at };
  const ours = new Set(issuerDomains.map(normalizeName));
  if (properties.some((p) => ours.has(issuerDomainOf(p.value) ?? ''))) return { permitted: true, relevant: at };
  const values = properties.map((p) => `${tag} ${JSON.stringify(p.value)}`).join(', ');
  return {
    permitted: false,
    relevant: at,
    problem: `The CAA records at ${at} do not authorize this CA to issue for ${fqdn} (${values}).`,
  };
}

const ISSUER_DOMAIN = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*$/;

/** RFC 8659 §4.2: `[issuer-domain-name] [";" parameters]`; null when empty or malformed (authorizes no one). */
function issuerDomainOf(value: string): string | null {
  const domain = normalizeName(value.split(';', 1)[0] ?? '');
  return ISSUER_DOMAIN.test(domain) ? domain : null;
}

export interface Approver {
  readonly ApproverEmail: string;
  readonly ApproverType: 'Generic' | 'Domain';
}

const CONSTRUCTED_LOCAL_PARTS = ['admin', 'administrator', 'webmaster', 'hostmaster', 'postmaster'] as const;

/**
 * The constructed approver addresses of a name (DESIGN §5.6): admin@, administrator@, webmaster@,
 * hostmaster@ and postmaster@ of the name and each parent down to its base domain, most specific
 * first; [] for a name without a base domain. No lookup: what discoverApprovers starts from.
 */
export function constructedApprovers(name: string): string[] {
  return approverNames(name)?.names.flatMap((n) => CONSTRUCTED_LOCAL_PARTS.map((local) => `${local}@${n}`)) ?? [];
}

/** The name (wildcard removed) and each parent down to its base domain; undefined without one. */
function approverNames(name: string): { domain: string; names: string[] } | undefined {
  const base = baseDomain(name);
  if (base === undefined) return undefined;
  const host = base.fqdn.startsWith('*.') ? base.fqdn.slice(2) : base.fqdn;
  return {
    domain: base.domain,
    names: climb(host).slice(0, host.split('.').length - base.domain.split('.').length + 1),
  };
}

/**
 * DESIGN §5.6 EMAIL approvers: the constructed addresses admin@, administrator@, webmaster@,
 * hostmaster@, postmaster@ of `name` and each parent down to and including its base domain
 * (`baseDomain`: ICANN section of the public suffix list, wildcard '*.' removed) — 'Generic';
 * then, per name from the most specific down to the base domain, the addresses in TXT
 * `_validation-contactemail.<name>` and in the CAA `contactemail` properties at the name —
 * 'Domain' (BR 3.2.2.4.13/14: any of these names may serve as the Authorization Domain Name).
 * Lower-cased, de-duplicated (first occurrence wins), invalid addresses skipped. Throws
 * CertdeskError 'invalidName' for a name without a base domain, DnsLookupError when a lookup
 * cannot be answered.
 */
export async function discoverApprovers(
  resolver: DnsLookups,
  name: string,
): Promise<{ domain: string; approvers: Approver[] }> {
  const found = approverNames(name);
  if (found === undefined)
    throw new CertdeskError('invalidName', `${JSON.stringify(name)} has no registered domain to find approvers for.`);
  const { domain, names } = found;

  const [txts, caas] = await Promise.all([
    Promise.all(names.map((n) => resolver.txt(`_validation-contactemail.${n}`))),
    Promise.all(names.map((n) => resolver.caa(n))),
  ]);

  const approvers: Approver[] = [];
  const seen = new Set<string>();
  const add = (address: string | null, type: Approver['ApproverType']): void => {
    if (address === null || seen.has(address)) return;
    seen.add(address);
    approvers.push({ ApproverEmail: address, ApproverType: type });
  };
  for (const address of constructedApprovers(name)) add(address, 'Generic');
  for (let i = 0; i < names.length; i++) {
    for (const value of txts[i] ?? []) add(emailAddress(value), 'Domain');
    for (const record of caas[i] ?? []) if (record.tag === 'contactemail') add(emailAddress(record.value), 'Domain');
  }
  return { domain, approvers };
}

const LOCAL_PART = /^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/;

/** A plain `local@domain` address (dot-atom local part, LDH domain), lower-cased; null if not one. */
function emailAddress(raw: string): string | null {
  const value = raw.trim().toLowerCase();
  const at = value.lastIndexOf('@');
  if (at <= 0 || value.length > 254) return null;
  const local = value.slice(0, at);
  if (local.length > 64 || !LOCAL_PART.test(local)) return null;
  const domain = checkDnsSyntax(value.slice(at + 1), { allowWildcard: false });
  // Only an already-ASCII domain: an address is mailed exactly as published.
  if (!domain.ok || domain.name !== value.slice(at + 1)) return null;
  return value;
}

/** The name and each parent up to (not including) the root: a.b.c → a.b.c, b.c, c. */
function climb(host: string): string[] {
  const labels = host.split('.');
  return labels.map((_, i) => labels.slice(i).join('.'));
}

function normalizeName(name: string): string {
  const n = name.trim().toLowerCase();
  return n.endsWith('.') ? n.slice(0, -1) : n;
}

function isQueryableName(host: string): boolean {
  if (host === '' || Buffer.byteLength(host) > 253) return false;
  return host.split('.').every((label) => label.length > 0 && Buffer.byteLength(label) <= 63);
}

function quoteSome(values: readonly string[]): string {
  const shown = values.slice(0, 3).map((v) => JSON.stringify(v.length > 64 ? `${v.slice(0, 61)}...` : v));
  return values.length > 3 ? `${shown.join(', ')} and ${values.length - 3} more` : shown.join(', ');
}
