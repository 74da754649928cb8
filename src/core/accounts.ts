import type { Role, Scope } from './access.js';
import type { ApplicationId, CustomerId, UserId } from './ids.js';

/** An account: everything a customer owns hangs off its id. Money in minor units. */
export interface Customer {
  readonly id: CustomerId;
  readonly name: string;
  readonly email: string;
  readonly currency: string;
  readonly creditLimitMinor: number;
  readonly usedMinor: number;
  readonly country: string;
  readonly locale: string;
  readonly timezone: string;
  readonly createdAt: number;
  /** The least length of its users' passwords (the other password rules hold for every customer). */
  readonly passwordMinLength: number;
  /** Every user must sign in with a second factor (TOTP). */
  readonly requireTwoFactor: boolean;
}

/** A (sub-)user of a customer; effective rights are its roles ∩ the token's scopes. */
export interface User {
  readonly id: UserId;
  readonly customerId: CustomerId;
  readonly username: string;
  readonly fullName: string;
  readonly email: string;
  readonly mobile: string | null;
  readonly roles: readonly Role[];
  readonly active: boolean;
  readonly timezone: string | null;
  readonly locale: string | null;
  readonly specialProductAvailability: boolean;
  readonly twoFactorEnabled: boolean;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly passwordChangedAt: number;
}

/** An API application: OAuth2 client credentials owned by a user. */
export interface Application {
  readonly id: ApplicationId;
  readonly customerId: CustomerId;
  readonly userId: UserId;
  readonly name: string;
  readonly clientId: string;
  readonly scopes: readonly Scope[];
  /** Where the authorization_code flow may send its codes (matched exactly); none for a client_credentials-only application. */
  readonly redirectUris: readonly string[];
  readonly createdAt: number;
  readonly revoked: boolean;
}

/** The account settings every response may need, carried with the principal (no extra query). */
export interface AccountSettings {
  readonly currency: string;
  readonly country: string;
  /** The user's locale, else the customer's. */
  readonly locale: string;
  /** The user's time zone, else the customer's. */
  readonly timezone: string;
}

/** Who is calling, resolved from a bearer token on every authenticated request. */
export interface Principal {
  readonly account: AccountSettings;
  readonly customerId: CustomerId;
  readonly userId: UserId;
  readonly applicationId: ApplicationId | null;
  readonly scopes: readonly Scope[];
  readonly roles: readonly Role[];
  readonly authType: 'API' | 'UI';
  readonly expiresAt: number;
}
