import type { Order, VettedData } from '../../core/index.js';
import type { OrganizationSubject } from '../../ca/index.js';

// What the certificate of an order says beyond its names: the subject of an OV/EV order, and
// how long the order's term runs.

const DAY = 86_400;

/** The certificate subject of an OV/EV order (DESIGN §5.7): OrganizationInfo as ordered, plus what the operator's vetting added. */
export function vettedSubject(order: Pick<Order, 'organization' | 'vetted'>): OrganizationSubject {
  const info = order.organization ?? {};
  const a = info.OrganizationAddress ?? {};
  const v: VettedData = order.vetted ?? {};
  const opt = <K extends string>(key: K, value: string | undefined) =>
    value === undefined || value === '' ? {} : ({ [key]: value } as Record<K, string>);
  return {
    organization: info.OrganizationName ?? '',
    country: (a.Country ?? '').toUpperCase(),
    ...opt('state', a.Region),
    ...opt('locality', a.City),
    ...opt('street', a.AddressLine1),
    ...opt('postalCode', a.PostalCode),
    ...opt('businessCategory', v.BusinessCategory),
    ...opt('registrationNumber', v.RegistrationNumber),
    ...opt('jurisdictionCountry', v.JurisdictionCountry?.toUpperCase()),
    ...opt('jurisdictionState', v.JurisdictionState),
    ...opt('jurisdictionLocality', v.JurisdictionLocality),
  };
}

/**
 * When an order's term ends if it starts at `start`: ValidityPeriod in calendar months, or in
 * days for the free automated product. Certificates are capped by this and by the lifetime the
 * Baseline Requirements allow; a longer term is a subscription covered by free reissues.
 */
export function termEnd(order: Pick<Order, 'validityPeriod'>, start: number, unit: 'months' | 'days'): number {
  if (unit === 'days') return start + order.validityPeriod * DAY;
  const d = new Date(start * 1000);
  d.setUTCMonth(d.getUTCMonth() + order.validityPeriod);
  return Math.floor(d.getTime() / 1000);
}
