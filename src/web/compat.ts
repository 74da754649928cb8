/**
 * Request quirks of existing integrations (DESIGN §5.2) that are not about body parsing:
 * boolean spellings, comma lists and member aliases. Applied before schema validation.
 */

/** `true/false`, `True/False`, `1/0` (and real booleans) → boolean; anything else undefined. */
export function parseBoolish(value: unknown): boolean | undefined {
  if (typeof value === 'boolean') return value;
  if (typeof value === 'number') return value === 1 ? true : value === 0 ? false : undefined;
  if (typeof value !== 'string') return undefined;
  const v = value.trim().toLowerCase();
  if (v === 'true' || v === '1') return true;
  if (v === 'false' || v === '0') return false;
  return undefined;
}

/** JSON-schema pattern for the boolean spellings above, for query strings. */
export const BOOLISH_PATTERN = '^(?:[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee]|1|0)$';

/** `Status=COMPLETE,PENDING` or `Status=COMPLETE&Status=PENDING` → ['COMPLETE','PENDING']. */
export function commaList(value: unknown): string[] {
  const parts = Array.isArray(value) ? value : [value];
  return parts
    .filter((p): p is string => typeof p === 'string')
    .flatMap((p) => p.split(','))
    .map((p) => p.trim())
    .filter(Boolean);
}

/** Member aliases: the alias is copied to the canonical name when the canonical one is absent. */
const ALIASES: readonly (readonly [alias: string, canonical: string])[] = [
  ['CertCenterOrderID', 'ServiceOrderID'],
];

/** Applies ALIASES to a query or body object in place (objects only; other values untouched). */
export function applyAliases(target: unknown): void {
  if (target === null || typeof target !== 'object' || Array.isArray(target)) return;
  const obj = target as Record<string, unknown>;
  for (const [alias, canonical] of ALIASES) {
    if (obj[canonical] === undefined && obj[alias] !== undefined) obj[canonical] = obj[alias];
  }
}

/** Path spellings of the original service that clients still send (sic), → the canonical path. */
const PATH_ALIASES: readonly (readonly [RegExp, string])[] = [
  [/^\/rest\/v1\/GetModifiedOrders(?=[/?]|$)/, '/rest/v1/ModifiedOrders'],
  [/^\/rest\/v1\/VulnerabiltyAssessmentRescan(?=[/?]|$)/, '/rest/v1/VulnerabilityAssessmentRescan'],
  [/^\/rest\/v1\/VulnerabiltyAssessment(?=[/?]|$)/, '/rest/v1/VulnerabilityAssessment'],
];

/** Rewrites an aliased request path (query kept); other URLs are returned unchanged. */
export function canonicalUrl(url: string): string {
  for (const [pattern, canonical] of PATH_ALIASES) if (pattern.test(url)) return url.replace(pattern, canonical);
  return url;
}

export interface DomainApprover {
  readonly Domain: string;
  readonly Approvers: string[];
}

/**
 * DomainApprovers as clients send them: `{DomainApprover: [...]}` or a bare array, with
 * `Approvers` as strings or as `{ApproverEmail}` objects. Returns the items, or undefined when
 * the value has neither shape (the caller reports the field).
 */
export function normalizeDomainApprovers(value: unknown): DomainApprover[] | undefined {
  const list = Array.isArray(value) ? value : (value as { DomainApprover?: unknown } | null)?.DomainApprover;
  if (!Array.isArray(list)) return undefined;
  const out: DomainApprover[] = [];
  for (const item of list) {
    const domain = (item as { Domain?: unknown } | null)?.Domain;
    const approvers = (item as { Approvers?: unknown } | null)?.Approvers;
    if (typeof domain !== 'string' || !Array.isArray(approvers)) return undefined;
    const emails = approvers.map((a) => (typeof a === 'string' ? a : (a as { ApproverEmail?: unknown } | null)?.ApproverEmail));
    if (!emails.every((e): e is string => typeof e === 'string')) return undefined;
    out.push({ Domain: domain, Approvers: emails });
  }
  return out;
}
