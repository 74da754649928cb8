/**
 * Who may call what: OAuth2 scopes (spec §5), roles (DESIGN §5.3) and the areas they open.
 * Every route names its area and whether it writes; the accepted scopes and roles are derived
 * from these tables, which `docs/access.md` shows (generated with `npm run docs:errors`).
 */
export const SCOPES = ['profile', 'limit', 'read', 'quote', 'order', 'voucher', 'write'] as const;
export type Scope = (typeof SCOPES)[number];

export const ROLES = ['ADMIN', 'ORDERS', 'VOUCHERS', 'BILLING', 'READONLY'] as const;
export type Role = (typeof ROLES)[number];

export type Area = 'profile' | 'limit' | 'catalog' | 'orders' | 'vouchers' | 'users';

export interface RouteAccess {
  readonly area: Area;
  readonly write: boolean;
}

/** The scope that opens an area for reading and writing; `read` and `write` open every area. */
export const AREA_SCOPE: Readonly<Record<Area, Scope | null>> = {
  profile: 'profile',
  limit: 'limit',
  catalog: 'quote',
  orders: 'order',
  vouchers: 'voucher',
  users: null,
};

type Rights = Readonly<Partial<Record<Area, 'r' | 'rw'>>>;

/** What each role may do per area (DESIGN §5.3). */
export const ROLE_RIGHTS: Readonly<Record<Role, Rights>> = {
  ADMIN: { profile: 'rw', limit: 'rw', catalog: 'rw', orders: 'rw', vouchers: 'rw', users: 'rw' },
  ORDERS: { profile: 'r', catalog: 'rw', orders: 'rw' },
  VOUCHERS: { profile: 'r', catalog: 'r', vouchers: 'rw' },
  BILLING: { profile: 'r', limit: 'r', catalog: 'r' },
  READONLY: { profile: 'r', limit: 'r', catalog: 'r', orders: 'r', vouchers: 'r' },
};

/** Scopes any one of which lets a token call a route of this access. */
export function acceptedScopes(access: RouteAccess): Scope[] {
  const own = AREA_SCOPE[access.area];
  const generic: Scope = access.write ? 'write' : 'read';
  return own === null ? [generic] : [own, generic];
}

export function scopeAllows(scopes: readonly Scope[], access: RouteAccess): boolean {
  const accepted = acceptedScopes(access);
  return scopes.some((s) => accepted.includes(s));
}

export function roleAllows(roles: readonly Role[], access: RouteAccess): boolean {
  return roles.some((role) => {
    const right = ROLE_RIGHTS[role][access.area];
    return right === 'rw' || (right === 'r' && !access.write);
  });
}

export function isScope(text: string): text is Scope {
  return (SCOPES as readonly string[]).includes(text);
}

export function isRole(text: string): text is Role {
  return (ROLES as readonly string[]).includes(text);
}

/** Parses a space- or comma-separated scope list; unknown names are returned separately. */
export function parseScopes(text: string): { scopes: Scope[]; unknown: string[] } {
  const scopes: Scope[] = [];
  const unknown: string[] = [];
  for (const part of text.split(/[\s,]+/).filter(Boolean)) {
    if (isScope(part)) {
      if (!scopes.includes(part)) scopes.push(part);
    } else unknown.push(part);
  }
  return { scopes, unknown };
}
