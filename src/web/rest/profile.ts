import { Type } from 'typebox';
import { bearerOf } from '../auth.js';
import type { App } from '../types.js';
import { principalOf } from '../types.js';
import { bearer, okBody, responses } from './schemas.js';

const Profile = okBody({
  AuthType: Type.Literal('OAUTH2'),
  AuthorizationID: Type.Integer(),
  Country: Type.String(),
  Currency: Type.String(),
  CustomerID: Type.Integer(),
  Locale: Type.String(),
  OAuth2_Token: Type.String(),
  Scope: Type.Union([Type.Literal('API'), Type.Literal('UI')]),
  Timezone: Type.String(),
});

/** GET /Profile (spec §4.1). */
export function registerProfile(app: App): void {
  app.get(
    '/Profile',
    {
      schema: { tags: ['account'], summary: 'The caller’s profile', security: bearer, response: responses(Profile) },
      config: { access: { area: 'profile', write: false } },
    },
    // The principal already carries the account settings: the profile costs no query.
    async (request) => {
      const principal = principalOf(request);
      return {
        success: true as const,
        AuthType: 'OAUTH2' as const,
        AuthorizationID: principal.userId,
        Country: principal.account.country,
        Currency: principal.account.currency,
        CustomerID: principal.customerId,
        Locale: principal.account.locale,
        OAuth2_Token: bearerOf(request.headers.authorization) ?? '',
        Scope: principal.authType,
        Timezone: principal.account.timezone,
      };
    },
  );
}
