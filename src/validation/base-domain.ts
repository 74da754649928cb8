import { parse } from 'tldts';
import { checkDnsSyntax } from './names.js';

/** GET /BaseDomain's answer (spec 4.21): the normalized name and its registered domain. */
export interface BaseDomain {
  /** The input normalized: lower-case, no trailing dot, punycode; a leading `*.` is kept. */
  fqdn: string;
  /** The registrable domain under the ICANN section of the public suffix list. */
  domain: string;
}

/**
 * The registered domain of a name (spec 4.21), for approver addresses and GET /BaseDomain.
 * Only the ICANN section of the public suffix list counts: `foo.github.io` → `github.io`,
 * `www.example.co.uk` → `example.co.uk`, because the registrant of `github.io` is who a CA
 * contacts. Returns undefined when the name fails `checkDnsSyntax` (wildcards allowed), when
 * its top-level domain is not in the list (internal names such as `host.corp`), or when it is
 * itself an ICANN public suffix (`co.uk`). Pure; never throws.
 */
export function baseDomain(fqdn: string): BaseDomain | undefined {
  const syntax = checkDnsSyntax(fqdn, { allowWildcard: true });
  if (!syntax.ok) return undefined;
  const name = syntax.name;
  const host = name.startsWith('*.') ? name.slice(2) : name;
  // The default rule "*" would make any unknown TLD look public: require a listed ICANN suffix.
  const psl = parse(host, { allowPrivateDomains: false, extractHostname: false });
  if (psl.isIcann !== true || !psl.domain) return undefined;
  return { fqdn: name, domain: psl.domain };
}
