import { amountOf, formatTimestamp, parseBoolish, progressOf, type OrderParameters } from '../../core/index.js';
import type { OrderCertificate, OrderView } from '../../ra/orders/order-reads.js';

// How an order is shown (spec 2.11): OrderInfo with the blocks the include* flags ask for, and
// the Fulfillment block of a certificate.

/** The include* flags of a read, as given (any boolean spelling of DESIGN §5.2). */
export type IncludeQuery = {
  [
    K in
      | 'includeFulfillment'
      | 'includeOrderParameters'
      | 'includeBillingDetails'
      | 'includeContacts'
      | 'includeOrganizationInfos'
      | 'includeDCVStatus'
  ]?: string;
};

export interface Includes {
  fulfillment: boolean;
  orderParameters: boolean;
  billing: boolean;
  contacts: boolean;
  organization: boolean;
  dcv: boolean;
}

export function includes(q: IncludeQuery): Includes {
  // Most reads ask for nothing (integrations polling an order's status).
  for (const _ in q)
    return {
      fulfillment: flagOn(q.includeFulfillment),
      orderParameters: flagOn(q.includeOrderParameters),
      billing: flagOn(q.includeBillingDetails),
      contacts: flagOn(q.includeContacts),
      organization: flagOn(q.includeOrganizationInfos),
      dcv: flagOn(q.includeDCVStatus),
    };
  return NOTHING_INCLUDED;
}

const NOTHING_INCLUDED: Includes = Object.freeze({
  fulfillment: false,
  orderParameters: false,
  billing: false,
  contacts: false,
  organization: false,
  dcv: false,
});

function flagOn(v: string | undefined): boolean {
  return parseBoolish(v) === true;
}

/** OrderInfo (spec 2.11): status always, the other blocks by the include* flags; no Fulfillment while pending. */
export function orderInfo(view: OrderView, inc: Includes): Record<string, unknown> {
  const { order, names, certificate, distrust, dates } = view;
  const major = order.majorStatus;
  const minor = order.minorStatus;
  const info: Record<string, unknown> = {
    ...orderIds(order.id),
    CommonName: order.commonName,
    OrderStatus: {
      OrderDate: formatTimestamp(order.orderDate),
      UpdateDate: formatTimestamp(order.updateDate),
      MajorStatus: major,
      MinorStatus: minor,
      Progress: progressOf(major, minor),
      ...(dates === undefined
        ? {}
        : { StartDate: formatTimestamp(dates.notBefore), EndDate: formatTimestamp(dates.notAfter) }),
    },
  };
  // Spec 2.11: present once the configuration scan ran (some days after issuance).
  if (view.configuration !== undefined) {
    const c = view.configuration;
    info.ConfigurationAssessment = {
      CriteriaVersion: c.criteriaVersion,
      Effective: formatTimestamp(c.at),
      Engine: c.engine,
      Ranking: c.grade ?? 'N/A',
    };
  }
  if (distrust !== undefined) {
    info.scheduledForReplacement = {
      eventCaDistrust: { Phase1: formatTimestamp(distrust.phase1), Phase2: formatTimestamp(distrust.phase2) },
    };
  }
  // Only an order with a certificate has the key at all (DESIGN §5.4).
  if (inc.fulfillment && certificate !== undefined) info.Fulfillment = fulfillment(certificate);
  if (inc.billing)
    info.BillingInfo = { Currency: order.price.currency, Price: amountOf(order.price), Status: order.billingStatus };
  if (inc.contacts) info.ContactInfo = order.contacts;
  if (inc.organization && order.organization !== null) info.OrganizationInfo = order.organization;
  if (inc.orderParameters) {
    info.OrderParameters = {
      ...echoParameters(order.parameters),
      // While the order waits for its proof, the whole of what to publish (as POST /Order answered); else the names.
      ...(view.dnsFqdns === undefined
        ? {}
        : { DNSAuthDetails: view.dcv === undefined ? { FQDNs: view.dnsFqdns } : view.dcv.dns }),
      ...(view.fileFqdns === undefined
        ? {}
        : { FileAuthDetails: view.dcv === undefined ? { FQDNs: view.fileFqdns } : view.dcv.file }),
    };
  }
  if (inc.dcv) {
    info.DCVStatus = names.map((n) => ({
      Domain: n.name,
      Method: n.method,
      Status: n.status,
      ...(n.approverEmail === null ? {} : { ApproverEmail: n.approverEmail }),
      ...(n.validatedAt === null ? {} : { ValidatedAt: formatTimestamp(n.validatedAt) }),
      ...(n.lastCheckedAt === null ? {} : { LastCheck: formatTimestamp(n.lastCheckedAt) }),
      ...(n.lastProblem === null ? {} : { Problem: n.lastProblem }),
    }));
  }
  return info;
}

/** Spec 2.10 Fulfillment of a certificate, with its validity bounds (DESIGN §5.7: scripts read EndDate). */
export function fulfillment(c: OrderCertificate): {
  Certificate: string;
  Intermediate: string;
  Certificate_PKCS7: string;
  StartDate: string;
  EndDate: string;
} {
  return {
    Certificate: c.certificate,
    Intermediate: c.intermediate,
    Certificate_PKCS7: c.pkcs7,
    StartDate: formatTimestamp(c.notBefore)!,
    EndDate: formatTimestamp(c.notAfter)!,
  };
}

/**
 * An order id under both names clients read (DESIGN §5.2): the spec's `ServiceOrderID` and the
 * original service's `CertCenterOrderID`, the same integer.
 */
export function orderIds(id: number): { ServiceOrderID: number; CertCenterOrderID: number } {
  return { ServiceOrderID: id, CertCenterOrderID: id };
}

/**
 * OrderParameters as an order echoes them: `DomainApprovers` in the API's own object shape
 * `{DomainApprover: [{Domain, Approvers: [{ApproverEmail}]}]}`, as /ApproverList returns it and as
 * typed clients decode it (every shape is accepted on input).
 */
export function echoParameters(p: OrderParameters): Record<string, unknown> {
  const { DomainApprovers, ...rest } = p;
  if (DomainApprovers === undefined) return rest;
  return {
    ...rest,
    DomainApprovers: {
      DomainApprover: DomainApprovers.map((d) => ({
        Domain: d.Domain,
        Approvers: d.Approvers.map((a) => ({ ApproverEmail: a })),
      })),
    },
  };
}
