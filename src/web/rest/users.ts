import { Type } from 'typebox';
import type { AccountSettings, User } from '../../core/index.js';
import type { Users } from '../../ra/accounts/users.js';
import type { App } from '../types.js';
import { principalOf } from '../types.js';
import { BoolishBody, bearer, okBody, responses } from './schemas.js';

const read = { access: { area: 'users', write: false } } as const;
const write = { access: { area: 'users', write: true } } as const;

const text = (description: string) => Type.Optional(Type.String({ maxLength: 300, description }));
const UserBody = Type.Object(
  {
    FullName: text('Required on creation'),
    Email: text('Required on creation'),
    Username: text('Required on creation: 3-64 letters, digits or . _ @ -; unique across the service; never changes'),
    Password: Type.Optional(
      Type.String({
        maxLength: 1024,
        description:
          "Required on creation: at least the account's least length (12 by default), not containing the username or the e-mail's local part, not a common password",
      }),
    ),
    Roles: Type.Optional(
      Type.Union([Type.Array(Type.String({ maxLength: 20 }), { maxItems: 10 }), Type.String({ maxLength: 100 })], {
        description: 'Required on creation: ADMIN, ORDERS, VOUCHERS, BILLING, READONLY',
      }),
    ),
    Mobile: Type.Optional(Type.Union([Type.String({ maxLength: 40 }), Type.Null()])),
    Timezone: text('IANA time zone name'),
    Locale: text('<language>_<COUNTRY>'),
    Language: text('Accepted in place of Locale'),
    Active: Type.Optional(BoolishBody),
  },
  { additionalProperties: true },
);
const Params = Type.Object({ UsernameOrId: Type.String({ minLength: 1, maxLength: 64 }) });

const UserInfo = Type.Object(
  {
    Id: Type.Integer(),
    Username: Type.String(),
    FullName: Type.String(),
    Email: Type.String(),
    Mobile: Type.String(),
    Scope: Type.String(),
    Active: Type.Boolean(),
    Roles: Type.Array(Type.String()),
    Timezone: Type.String(),
    Locale: Type.String(),
    Language: Type.String(),
    SpecialProductAvailability: Type.Boolean(),
    TwoFactorEnabled: Type.Boolean(),
    InsertDate: Type.Integer(),
    LastUpdateDate: Type.Integer(),
    LastPasswordChangeDate: Type.Integer(),
  },
  { description: 'Spec 2.12; dates are integer UTC seconds' },
);

/** Spec 2.12: a user as shown; time zone and locale fall back to the account's. */
function userInfo(u: User, account: AccountSettings) {
  const locale = u.locale ?? account.locale;
  return {
    Id: u.id,
    Username: u.username,
    FullName: u.fullName,
    Email: u.email,
    Mobile: u.mobile ?? '',
    // A user is a person: it signs in to the web interface (its applications call the API).
    Scope: 'UI',
    Active: u.active,
    Roles: [...u.roles],
    Timezone: u.timezone ?? account.timezone,
    Locale: locale,
    Language: locale,
    SpecialProductAvailability: u.specialProductAvailability,
    TwoFactorEnabled: u.twoFactorEnabled,
    InsertDate: u.createdAt,
    LastUpdateDate: u.updatedAt,
    LastPasswordChangeDate: u.passwordChangedAt,
  };
}

/** POST /User, POST /User/{UsernameOrId}, GET /User[/{UsernameOrId}], DELETE /User/{UsernameOrId} (spec §4.24–4.27). */
export function registerUsers(app: App, deps: { users: Users }): void {
  app.post(
    '/User',
    {
      schema: {
        tags: ['users'],
        summary: 'Add a user',
        security: bearer,
        body: UserBody,
        response: responses(
          okBody({
            Id: Type.Integer(),
            FullName: Type.String(),
            Username: Type.String(),
            Roles: Type.Array(Type.String()),
          }),
        ),
      },
      config: write,
    },
    async (request) => {
      const user = await deps.users.createUser(
        { principal: principalOf(request), clientAddress: request.ip },
        request.body,
      );
      return {
        success: true as const,
        Id: user.id,
        FullName: user.fullName,
        Username: user.username,
        Roles: [...user.roles],
      };
    },
  );

  app.post(
    '/User/:UsernameOrId',
    {
      schema: {
        tags: ['users'],
        summary: 'Change a user (only the members given)',
        security: bearer,
        params: Params,
        body: UserBody,
        response: responses(okBody({ Id: Type.Integer() })),
      },
      config: write,
    },
    async (request) => {
      const user = await deps.users.updateUser(
        { principal: principalOf(request), clientAddress: request.ip },
        request.params.UsernameOrId,
        request.body,
      );
      return { success: true as const, Id: user.id };
    },
  );

  app.get(
    '/User',
    {
      schema: {
        tags: ['users'],
        summary: "The account's users",
        security: bearer,
        response: responses(okBody({ UserInfos: Type.Array(UserInfo) })),
      },
      config: read,
    },
    async (request) => {
      const principal = principalOf(request);
      const users = await deps.users.listUsers(principal);
      return { success: true as const, UserInfos: users.map((u) => userInfo(u, principal.account)) };
    },
  );

  app.get(
    '/User/:UsernameOrId',
    {
      schema: {
        tags: ['users'],
        summary: 'One user',
        security: bearer,
        params: Params,
        response: responses(okBody({ UserInfo })),
      },
      config: read,
    },
    async (request) => {
      const principal = principalOf(request);
      const user = await deps.users.getUser(principal, request.params.UsernameOrId);
      return { success: true as const, UserInfo: userInfo(user, principal.account) };
    },
  );

  app.delete(
    '/User/:UsernameOrId',
    {
      schema: {
        tags: ['users'],
        summary: 'Delete a user',
        security: bearer,
        params: Params,
        response: responses(okBody({ Id: Type.Integer(), UserNameOrUserId: Type.String() })),
      },
      config: write,
    },
    async (request) => {
      const user = await deps.users.deleteUser(
        { principal: principalOf(request), clientAddress: request.ip },
        request.params.UsernameOrId,
      );
      return { success: true as const, Id: user.id, UserNameOrUserId: request.params.UsernameOrId };
    },
  );
}
