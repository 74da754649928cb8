import type { CaBrand, Contact, CustomerId, FieldFault, OrderContacts, OrganizationInfo } from '../../core/index.js';
import type { CustomersRepo, UsersRepo } from '../../storage/index.js';

// The contacts and organization of an order (spec 2.7, §4.9), checked for the order rules.

/** spec 2.7 address, as sent. */
export interface AddressInput {
  readonly AddressLine1?: unknown;
  readonly PostalCode?: unknown;
  readonly City?: unknown;
  readonly Region?: unknown;
  readonly Country?: unknown;
  readonly Phone?: unknown;
  readonly Fax?: unknown;
}
/** spec 2.7 contact, as sent. */
export interface ContactInput {
  readonly Title?: unknown;
  readonly FirstName?: unknown;
  readonly LastName?: unknown;
  readonly Phone?: unknown;
  readonly Fax?: unknown;
  readonly Email?: unknown;
  readonly OrganizationName?: unknown;
  readonly OrganizationAddress?: AddressInput;
}
/** The members of an order's body this module reads. */
export interface ContactsInput {
  readonly AdminContact?: ContactInput;
  readonly TechContact?: ContactInput;
  readonly OrganizationInfo?: {
    readonly OrganizationName?: unknown;
    readonly OrganizationAddress?: AddressInput;
  } | null;
}

type Bad = (field: string, message: string, kind?: FieldFault['kind']) => void;

const EMAIL = /^[a-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[a-z0-9-]+(\.[a-z0-9-]+)+$/i;
const text = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined);

const CONTACT_TEXT = ['Title', 'FirstName', 'LastName', 'Phone', 'Fax', 'Email', 'OrganizationName'] as const;
const ADDRESS_TEXT = ['AddressLine1', 'PostalCode', 'City', 'Region', 'Country', 'Phone', 'Fax'] as const;

/**
 * AdminContact, TechContact and OrganizationInfo (spec 2.7, §4.9): what every order needs, what
 * OV/EV and the brand that requires it add, and every spec member that is given being text.
 * Returns them as the order keeps them (extra members as sent; a `Vetted` member is the
 * operator's to write, never the customer's). With `defaults` (the free automated DV product,
 * whose clients send no contacts), a contact left out is the account's own, unchecked.
 */
export function checkContacts(
  input: ContactsInput,
  orgLevel: boolean,
  brand: Pick<CaBrand, 'contactOrganizationRequired'>,
  bad: Bad,
  defaults?: Contact,
): { contacts: OrderContacts; organization: OrganizationInfo | null } {
  const given = { AdminContact: input.AdminContact, TechContact: input.TechContact };
  for (const which of ['AdminContact', 'TechContact'] as const) {
    const c = input[which];
    if (defaults !== undefined && contactLeftOut(c)) {
      given[which] = defaults;
      continue;
    }
    if (typeof c !== 'object' || c === null) {
      bad(which, `${which} is required.`);
      continue;
    }
    const need = [
      'FirstName',
      'LastName',
      'Phone',
      'Email',
      ...(orgLevel ? ['Title', 'Fax'] : []),
      ...(brand.contactOrganizationRequired ? ['OrganizationName'] : []),
    ] as const;
    for (const f of need) if (missing(c[f as keyof ContactInput])) bad(`${which}.${f}`, `${which}.${f} is required.`);
    textMembers(c, CONTACT_TEXT, which, bad);
    const email = text(c.Email);
    if (email !== undefined && !EMAIL.test(email)) bad(`${which}.Email`, `${which}.Email is not an e-mail address.`);
    if (orgLevel || brand.contactOrganizationRequired)
      checkAddress(c.OrganizationAddress, `${which}.OrganizationAddress`, false, bad);
    else if (c.OrganizationAddress !== undefined)
      textMembers(c.OrganizationAddress, ADDRESS_TEXT, `${which}.OrganizationAddress`, bad);
  }
  const o = input.OrganizationInfo;
  if (orgLevel) {
    if (typeof o !== 'object' || o === null)
      bad('OrganizationInfo', 'OrganizationInfo is required for OV and EV orders.');
    else {
      if (missing(o.OrganizationName))
        bad('OrganizationInfo.OrganizationName', 'OrganizationInfo.OrganizationName is required.');
      checkAddress(o.OrganizationAddress, 'OrganizationInfo.OrganizationAddress', true, bad);
    }
  }
  let organization: OrganizationInfo | null = null;
  if (typeof o === 'object' && o !== null) {
    textMembers(o, ['OrganizationName'], 'OrganizationInfo', bad);
    if (!orgLevel && o.OrganizationAddress !== undefined)
      textMembers(o.OrganizationAddress, ADDRESS_TEXT, 'OrganizationInfo.OrganizationAddress', bad);
    const { Vetted: _vetted, ...ordered } = o as OrganizationInfo & { Vetted?: unknown };
    organization = ordered;
  }
  // The spec members were checked above to be text (or the order is refused): the domain's types hold.
  const contact = (c: ContactInput | undefined) => c as Contact | undefined;
  return {
    contacts: { AdminContact: contact(given.AdminContact), TechContact: contact(given.TechContact) },
    organization,
  };
}

/** A contact not given at all: absent, null or `{}`. */
export function contactLeftOut(c: unknown): boolean {
  return c === undefined || c === null || (typeof c === 'object' && Object.keys(c).length === 0);
}

/** A required member left out, null or blank (one given as something other than text is `textMembers`' fault). */
const missing = (v: unknown): boolean => v === undefined || v === null || (typeof v === 'string' && v.trim() === '');

/** Faults each of `members` of `obj` that is given (not null) but not text; anything not an object is one fault. */
function textMembers(obj: unknown, members: readonly string[], field: string, bad: Bad): void {
  if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) return bad(field, `${field} is an object.`);
  for (const m of members) {
    const v = (obj as Record<string, unknown>)[m];
    if (v !== undefined && v !== null && typeof v !== 'string') bad(`${field}.${m}`, `${field}.${m} is text.`);
  }
}

function checkAddress(a: AddressInput | undefined, field: string, withPhone: boolean, bad: Bad): void {
  if (typeof a !== 'object' || a === null) return bad(field, `${field} is required.`);
  textMembers(a, ADDRESS_TEXT, field, bad);
  for (const f of [
    'AddressLine1',
    'PostalCode',
    'City',
    'Region',
    'Country',
    ...(withPhone ? ['Phone'] : []),
  ] as const) {
    if (missing(a[f as keyof AddressInput])) bad(`${field}.${f}`, `${field}.${f} is required.`);
  }
  const country = text(a.Country);
  if (country !== undefined && !/^[A-Za-z]{2}$/.test(country))
    bad(`${field}.Country`, `${field}.Country is a two-letter ISO 3166 code.`);
}

/**
 * The account's own contact (the free automated DV product's default): its first active ADMIN
 * user's name, e-mail and mobile number, with the customer's name as the organization.
 */
export async function accountContact(
  deps: { customers: Pick<CustomersRepo, 'byId'>; users: Pick<UsersRepo, 'listByCustomer'> },
  customerId: CustomerId,
): Promise<Contact | undefined> {
  const customer = await deps.customers.byId(customerId);
  if (customer === undefined) return undefined;
  const admin = (await deps.users.listByCustomer(customerId))
    .filter((u) => u.active && u.roles.includes('ADMIN'))
    .sort((a, b) => a.id - b.id)[0];
  const fullName = (admin?.fullName ?? customer.name).trim();
  const cut = fullName.lastIndexOf(' ');
  return {
    FirstName: cut > 0 ? fullName.slice(0, cut) : fullName,
    ...(cut > 0 ? { LastName: fullName.slice(cut + 1) } : {}),
    Email: admin?.email ?? customer.email,
    ...(admin?.mobile === null || admin?.mobile === undefined ? {} : { Phone: admin.mobile }),
    OrganizationName: customer.name,
  };
}
