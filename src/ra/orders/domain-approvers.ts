import { baseDomain, constructedApprovers } from '../../validation/index.js';

// Who approves each name of an order validated by EMAIL (spec §4.9 rule 1, §4.16): one reading
// of DomainApprovers for POST /Order, POST /Reissue and, next, voucher redemption.

/** One DomainApprovers item as read: its domain and approver addresses, lower-cased, in order. */
export interface DomainApproverItem {
  readonly domain: string;
  readonly approvers: readonly string[];
}

const EMAIL = /^[a-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[a-z0-9-]+(\.[a-z0-9-]+)+$/i;

/**
 * DomainApprovers in every shape real clients send (DESIGN §5.2): `{DomainApprover: [...]}` or a
 * bare array; each item's `Approvers` an array of strings or of `{ApproverEmail}` objects, or one
 * comma-separated string. Undefined when the value is in neither shape. An item without a domain
 * or an address comes back with an empty `domain` or `approvers`, for the caller to report.
 */
export function readDomainApprovers(value: unknown): DomainApproverItem[] | undefined {
  const list = Array.isArray(value)
    ? value
    : (value as { DomainApprover?: unknown } | null | undefined)?.DomainApprover;
  if (!Array.isArray(list)) return undefined;
  return list.map((item: unknown) => {
    const { Domain, Approvers } = (typeof item === 'object' && item !== null ? item : {}) as {
      Domain?: unknown;
      Approvers?: unknown;
    };
    const raw = Array.isArray(Approvers) ? Approvers : [Approvers];
    const approvers = raw
      .map((a: unknown) => (typeof a === 'object' && a !== null ? (a as { ApproverEmail?: unknown }).ApproverEmail : a))
      .flatMap((a) => (typeof a === 'string' ? a.split(',') : []))
      .map((a) => a.trim().toLowerCase())
      .filter((a) => a !== '');
    return { domain: typeof Domain === 'string' ? Domain.trim().toLowerCase() : '', approvers };
  });
}

/**
 * The domains a DomainApprovers item may name to cover `name`, most specific first: the name
 * itself, then each parent down to its registered domain (clients key the items by the registered
 * domain: `example.com` for `www.example.com`). A wildcard's parents are those of its base name.
 */
export function coveringDomains(name: string): string[] {
  const bare = name.startsWith('*.') ? name.slice(2) : name;
  const registered = baseDomain(bare)?.domain;
  const out = [name];
  if (registered === undefined) return out;
  for (let d = bare; d.length >= registered.length; d = d.slice(d.indexOf('.') + 1)) {
    if (!out.includes(d)) out.push(d);
    if (!d.includes('.')) break;
  }
  return out;
}

/** Where an approver came from, and the request member a fault about it names. */
export interface ApproverFallback {
  /** The address for names no DomainApprovers item covers (ApproverEmail, ReissueEmail, the admin contact). */
  readonly email: string | undefined;
  /** The member named when that address is missing or is not an approver. */
  readonly field: string;
}

/**
 * One approver per name: the first address of the item naming the name, else of the item naming
 * its nearest parent down to its registered domain (DESIGN §5.2), else the fallback. Every address must be one of the name's
 * constructed approvers (GET /ApproverList). Faults go to `bad`: DomainApprovers that is not a
 * list of items, an item without a domain or an address, an item naming no name of the order nor
 * a parent of one down to its registered domain, a name left without an approver, an address that is not one.
 */
export function assignApprovers(
  names: readonly string[],
  domainApprovers: unknown,
  fallback: ApproverFallback,
  bad: (field: string, message: string) => void,
): Map<string, string> {
  const out = new Map<string, string>();
  const given = domainApprovers !== undefined && domainApprovers !== null;
  const items = given ? readDomainApprovers(domainApprovers) : [];
  if (items === undefined) {
    bad('DomainApprovers', 'DomainApprovers is an array of {Domain, Approvers}.');
    return out;
  }
  const covering = new Map(names.map((n) => [n, coveringDomains(n)]));
  const coverable = new Set([...covering.values()].flat());
  const byDomain = new Map<string, string>();
  for (const item of items) {
    const first = item.approvers[0];
    if (item.domain === '' || first === undefined) {
      bad('DomainApprovers', 'Each DomainApprovers item needs a Domain and at least one approver address.');
      continue;
    }
    if (!coverable.has(item.domain)) {
      bad(
        'DomainApprovers',
        `DomainApprovers names ${item.domain}, which is neither a name of the order nor a parent of one down to its registered domain.`,
      );
      continue;
    }
    if (!byDomain.has(item.domain)) byDomain.set(item.domain, first);
  }
  const fromItems = new Set<string>();
  for (const name of names) {
    const domain = covering.get(name)!.find((d) => byDomain.has(d));
    const chosen = domain === undefined ? undefined : byDomain.get(domain);
    if (chosen !== undefined) fromItems.add(name);
    const email = chosen ?? fallback.email;
    if (email !== undefined) out.set(name, email);
  }
  const missing = names.filter((n) => !out.has(n));
  if (missing.length > 0) {
    if (given) bad('DomainApprovers', `No approver for ${missing.join(', ')}.`);
    else
      bad(
        fallback.field,
        `EMAIL validation needs an approver for ${missing.join(', ')}: give ${fallback.field} or DomainApprovers (see GET /ApproverList).`,
      );
  }
  for (const [name, email] of out) {
    if (!EMAIL.test(email) || !constructedApprovers(name).includes(email)) {
      bad(
        fromItems.has(name) ? 'DomainApprovers' : fallback.field,
        `${email} is not an approver of ${name} (see GET /ApproverList).`,
      );
    }
  }
  return out;
}
