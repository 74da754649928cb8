import type { Product, ProductType, SignatureHashAlgorithm, ValidationLevel } from './catalog.js';
import type { CertificateId, CustomerId, OrderId, OrderNameId } from './ids.js';
import type { Money } from './money.js';
import type { BillingStatus, MajorStatus, MinorStatus, NameDcvStatus, OrderDcvMethod } from './orders.js';

// An order as the RA and the web see it (Boulder's `core.Order`): built from its row in one place
// (storage/order-model.ts), status as the closed unions of DESIGN §5.4, request data parsed once,
// money in minor units with its currency. Member names of request data keep the spec's spelling.

/** Spec 2.7 OrganizationAddress. */
export interface Address {
  readonly AddressLine1?: string;
  readonly PostalCode?: string;
  readonly City?: string;
  readonly Region?: string;
  readonly Country?: string;
  readonly Phone?: string;
  readonly Fax?: string;
}

/** Spec 2.7 Contact (AdminContact, TechContact). */
export interface Contact {
  readonly Title?: string;
  readonly FirstName?: string;
  readonly LastName?: string;
  readonly Phone?: string;
  readonly Fax?: string;
  readonly Email?: string;
  readonly OrganizationName?: string;
  readonly OrganizationAddress?: Address;
}

/** The contacts of an order as it was placed. */
export interface OrderContacts {
  readonly AdminContact?: Contact;
  readonly TechContact?: Contact;
}

/** Spec 2.7 OrganizationInfo, as the customer ordered it. */
export interface OrganizationInfo {
  readonly OrganizationName?: string;
  readonly OrganizationAddress?: Address;
}

/** What the operator's vetting of an OV/EV organization recorded (EV Guidelines §7.1.4.2.3, §9.2.4). */
export interface VettedData {
  readonly BusinessCategory?: string;
  readonly RegistrationNumber?: string;
  readonly JurisdictionCountry?: string;
  readonly JurisdictionState?: string;
  readonly JurisdictionLocality?: string;
}

/** One approver per name, as stored in an order's parameters. */
export interface DomainApprover {
  readonly Domain: string;
  readonly Approvers: readonly string[];
}

/** Spec 2.8 OrderParameters as the order was placed (a reissue replaces the names, method and chain). */
export interface OrderParameters {
  readonly ProductCode: string;
  readonly PartnerOrderID: string;
  readonly ValidityPeriod: number;
  readonly ServerCount: number;
  /** SAN hosts that count for the price (the common name's www./bare twin is free). */
  readonly SubjectAltNames: readonly string[];
  /** The SAN hosts paid for; a reissue keeps it. */
  readonly SubjectAltNameCount: number;
  readonly DVAuthMethod: OrderDcvMethod;
  readonly SignatureHashAlgorithm: SignatureHashAlgorithm;
  readonly InstallationService: boolean;
  readonly ExpediteIssuance: boolean;
  readonly IsRenewal: boolean;
  readonly IsCompetitiveUpgrade: boolean;
  readonly IsUpsell: boolean;
  readonly DomainApprovers?: readonly DomainApprover[];
  /** Deprecated (spec §9): the approver of the common name. */
  readonly ApproverEmail?: string;
}

/** An order (spec 2.11). Times are whole UTC seconds. */
export interface Order {
  readonly id: OrderId;
  readonly customerId: CustomerId;
  readonly partnerOrderId: string;
  readonly productCode: string;
  /** The product as it was sold (null for orders placed before it was kept): the catalog may have dropped or changed it since. */
  readonly soldProduct: Product | null;
  readonly productType: ProductType;
  readonly caBrand: string;
  readonly validationLevel: ValidationLevel | null;
  readonly commonName: string;
  /** The order's names after the common name, as signed. */
  readonly sanNames: readonly string[];
  readonly majorStatus: MajorStatus;
  /** As stored; a reader shows EXPIRED for a COMPLETE order past its EndDate (derived, never stored). */
  readonly minorStatus: MinorStatus;
  readonly dvAuthMethod: OrderDcvMethod | null;
  readonly signatureHashAlgorithm: SignatureHashAlgorithm;
  readonly validityPeriod: number;
  readonly serverCount: number;
  readonly parameters: OrderParameters;
  readonly contacts: OrderContacts;
  readonly organization: OrganizationInfo | null;
  /** The operator's vetting; null until an OV/EV order is approved. Never shown to the customer. */
  readonly vetted: VettedData | null;
  readonly csrPem: string | null;
  readonly csrSha256: string | null;
  readonly price: Money;
  readonly billingStatus: BillingStatus;
  readonly orderDate: number;
  readonly updateDate: number;
  /** The first issuance: the cancel and refund windows count from it. */
  readonly issuedAt: number | null;
  /** End of the term paid for (a subscription runs past its certificates). */
  readonly termEnd: number | null;
  readonly failureReason: string | null;
  /** The DCV value the order (or its current reissue round) was placed with. */
  readonly dcvValue: string | null;
  /** When the current reissue round started; null before any reissue. */
  readonly reissuedAt: number | null;
  /** The newest certificate when that round started: the round's own certificates come after it. */
  readonly reissueBaseCert: CertificateId | null;
  /** EndDate of the current certificate. */
  readonly certNotAfter: number | null;
  /** Who holds the right to sign the current issuance round, and until when (IssuanceRounds.issue). */
  readonly issuanceClaim: string | null;
  readonly issuanceClaimUntil: number | null;
  /** The Idempotency-Key of the DELETE /Order that cancelled the order, and whether it refunded. */
  readonly cancelKey: string | null;
  readonly cancelRefunded: boolean | null;
}

/** One name of an order and the state of its domain control validation. */
export interface OrderName {
  readonly id: OrderNameId;
  readonly orderId: OrderId;
  readonly name: string;
  readonly method: OrderDcvMethod;
  readonly status: NameDcvStatus;
  readonly approverEmail: string | null;
  readonly validatedAt: number | null;
  readonly lastCheckedAt: number | null;
  readonly lastProblem: string | null;
}

/** A name's state as an order's view shows it: everything but its row id. */
export type OrderNameState = Omit<OrderName, 'id'>;
