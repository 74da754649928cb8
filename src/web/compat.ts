/**
 * Request quirks of existing integrations (DESIGN §5.2) that are not about body parsing: member
 * and path aliases, applied before schema validation. Booleans are read by core's `parseBoolish`,
 * DomainApprovers by the order rules (ra/domain-approvers.ts).
 */

/** Member aliases: the alias is copied to the canonical name when the canonical one is absent. */
const ALIASES: readonly (readonly [alias: string, canonical: string])[] = [['CertCenterOrderID', 'ServiceOrderID']];

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
  // The misspelt VulnerabiltyAssessment paths of DESIGN §5.2 (sic).
  [/^\/rest\/v1\/VulnerabiltyAssessmentRescan(?=[/?]|$)/, '/rest/v1/VulnerabilityAssessmentRescan'],
  [/^\/rest\/v1\/VulnerabiltyAssessment(?=[/?]|$)/, '/rest/v1/VulnerabilityAssessment'],
];

/** Rewrites an aliased request path (query kept); other URLs are returned unchanged. */
export function canonicalUrl(url: string): string {
  for (const [pattern, canonical] of PATH_ALIASES) if (pattern.test(url)) return url.replace(pattern, canonical);
  return url;
}
