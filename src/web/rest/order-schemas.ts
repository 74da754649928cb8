import { Type } from 'typebox';
import { SIGNATURE_HASH_ALGORITHMS } from '../../core/index.js';
import { Boolish, BoolishBody, DNSAuthDetails, FileAuthDetails, failureMembers } from './schemas.js';

// TypeBox schemas of the order routes (spec §4.9, §4.12–4.14), for validation and the OpenAPI
// document. The body schema types each member and leaves what depends on the product (required
// contacts, ValidityPeriod, methods, chains) to the order rules, which report every such fault
// at once (DESIGN §5.1); extra members are kept, as the original service ignored them.

const text = (description: string) => Type.Optional(Type.String({ description }));

const Address = Type.Object(
  {
    AddressLine1: text('Street'),
    PostalCode: text('Postal code'),
    City: text('City'),
    Region: text('State or region'),
    Country: text('ISO 3166 two-letter code'),
    Phone: text('Phone'),
    Fax: text('Fax'),
  },
  { additionalProperties: true, description: 'Spec 2.7 OrganizationAddress' },
);

const Contact = Type.Object(
  {
    Title: text('Required on OV/EV'),
    FirstName: text('Required'),
    LastName: text('Required'),
    Phone: text('Required'),
    Fax: text('Required on OV/EV'),
    Email: text('Required'),
    OrganizationName: text('Required at the brand that asks for it'),
    OrganizationAddress: Type.Optional(Address),
  },
  {
    additionalProperties: true,
    description:
      "Spec 2.7 Contact. Required on every order; the members each product needs are checked with the order's other rules",
  },
);

const OrganizationInfo = Type.Union(
  [
    Type.Object(
      { OrganizationName: text('Required on OV/EV'), OrganizationAddress: Type.Optional(Address) },
      { additionalProperties: true },
    ),
    Type.Null(),
  ],
  { description: 'Spec 2.7 OrganizationInfo: OV and EV orders only' },
);

const Approver = Type.Union([
  Type.String(),
  Type.Object({ ApproverEmail: Type.String() }, { additionalProperties: true }),
]);
const DomainApprover = Type.Object(
  {
    Domain: Type.String({
      description: "A name of the order, or a name's registered domain (then it covers every name under it)",
    }),
    // The array first: with coercion on, a one-element array of objects must not be unwrapped (a string becomes a one-element array, which the rules read alike).
    Approvers: Type.Union([Type.Array(Approver), Type.String({ description: 'Comma-separated addresses' })], {
      description: 'The first address approves',
    }),
  },
  { additionalProperties: true },
);
const DomainApprovers = Type.Union(
  [
    Type.Array(DomainApprover),
    Type.Object({ DomainApprover: Type.Array(DomainApprover) }, { additionalProperties: true }),
  ],
  {
    description:
      'Spec 4.9 rule 1: one approver per name for EMAIL validation, as a bare array or as {DomainApprover: [...]}; names it leaves out take ApproverEmail',
  },
);
// A string first: with coercion on, a comma-separated list must not become a one-element array
// before the rules split it.
const names = (description: string) =>
  Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())], { description }));

/** Spec 2.8 OrderParameters of POST /Order. */
export const OrderParametersIn = Type.Object(
  {
    ProductCode: text('Required; a code from /Products'),
    PartnerOrderID: text(
      'Your reference, 1-64 printable characters; generated when omitted. The same one with the same body returns the original order',
    ),
    ValidityPeriod: Type.Optional(
      Type.Integer({ description: 'Required: months (12 or 24), or days (180-365) on the free automated DV product' }),
    ),
    CSR: text('Required: PEM PKCS#10 of an RSA (2048 bits or more) or ECDSA P-256/P-384 key'),
    ServerCount: Type.Optional(
      Type.Union([Type.Integer(), Type.Literal('')], {
        description: 'Default 1; required on license-priced products and at the brand that asks for it',
      }),
    ),
    SubjectAltNames: names('SAN hosts: an array, or a comma-separated string'),
    SubjectAltName: names('Alias of SubjectAltNames'),
    DVAuthMethod: text('EMAIL (default), DNS or FILE; one the product offers'),
    ApproverEmail: text('Deprecated: the approver of every name DomainApprovers leaves out'),
    DomainApprovers: Type.Optional(DomainApprovers),
    SignatureHashAlgorithm: text(
      `One of ${SIGNATURE_HASH_ALGORITHMS.join(', ')} the brand offers (default SHA256-FULL-CHAIN); the ECC chains need an ECC key`,
    ),
    InstallationService: Type.Optional(BoolishBody),
    ExpediteIssuance: Type.Optional(BoolishBody),
    IsRenewal: Type.Optional(BoolishBody),
    IsCompetitiveUpgrade: Type.Optional(BoolishBody),
    IsUpsell: Type.Optional(BoolishBody),
  },
  { additionalProperties: true, description: 'Spec 2.8' },
);

/** The body of POST /Order (spec §4.9). */
export const OrderBody = Type.Object(
  {
    OrderParameters: OrderParametersIn,
    AdminContact: Type.Optional(Contact),
    TechContact: Type.Optional(Contact),
    OrganizationInfo: Type.Optional(OrganizationInfo),
  },
  { additionalProperties: true },
);

/** OrderParameters as an order echoes them (spec 4.9 response). */
export const OrderParametersOut = Type.Object(
  {
    ProductCode: Type.String(),
    PartnerOrderID: Type.String(),
    ValidityPeriod: Type.Integer(),
    ServerCount: Type.Integer(),
    SubjectAltNames: Type.Array(Type.String()),
    SubjectAltNameCount: Type.Integer(),
    DVAuthMethod: Type.String(),
    SignatureHashAlgorithm: Type.String(),
    InstallationService: Type.Boolean(),
    ExpediteIssuance: Type.Boolean(),
    IsRenewal: Type.Boolean(),
    IsCompetitiveUpgrade: Type.Boolean(),
    IsUpsell: Type.Boolean(),
    DomainApprovers: Type.Optional(
      Type.Object(
        {
          DomainApprover: Type.Array(
            Type.Object({
              Domain: Type.String(),
              Approvers: Type.Array(Type.Object({ ApproverEmail: Type.String() })),
            }),
          ),
        },
        { description: 'The approver of each name, in the shape GET /ApproverList returns' },
      ),
    ),
    ApproverEmail: Type.Optional(Type.String()),
    DNSAuthDetails: Type.Optional(DNSAuthDetails),
    FileAuthDetails: Type.Optional(FileAuthDetails),
  },
  { additionalProperties: true },
);

/** Spec 2.10 Fulfillment, with the certificate's validity bounds (DESIGN §5.7). */
export const Fulfillment = Type.Object(
  {
    Certificate: Type.String(),
    Intermediate: Type.String(),
    Certificate_PKCS7: Type.String(),
    StartDate: Type.String(),
    EndDate: Type.String(),
  },
  { description: 'When issued at once' },
);

/** POST /Order's answer. */
export const PlacedOrder = Type.Object(
  {
    success: Type.Literal(true),
    Timestamp: Type.String(),
    ServiceOrderID: Type.Integer(),
    CertCenterOrderID: Type.Integer({
      description: 'The same as ServiceOrderID, under the name existing clients read',
    }),
    OrderParameters: OrderParametersOut,
    Fulfillment: Type.Optional(Fulfillment),
  },
  {
    description:
      'ServiceOrderID, OrderParameters (with the DCV details of the method), Fulfillment when issued at once',
  },
);

/** A refused order (spec §7: ServiceOrderID 0), every fault in Errors. */
export const OrderFailure = Type.Object(
  {
    ...failureMembers,
    ServiceOrderID: Type.Integer(),
    CertCenterOrderID: Type.Integer(),
    Timestamp: Type.String(),
  },
  { description: 'Failure of POST /Order: every fault in Errors, ServiceOrderID 0' },
);

/** The include* flags of the order reads (spec §4.12). */
export const Include = {
  includeFulfillment: Type.Optional(Boolish),
  includeOrderParameters: Type.Optional(Boolish),
  includeBillingDetails: Type.Optional(Boolish),
  includeContacts: Type.Optional(Boolish),
  includeOrganizationInfos: Type.Optional(Boolish),
  includeDCVStatus: Type.Optional(Boolish),
};

/** OrderInfo (spec 2.11) is open-ended: its blocks appear by the include* flags. */
export const OrderInfo = Type.Object(
  {},
  { additionalProperties: true, description: 'Spec 2.11; blocks by the include* flags' },
);
