import { Type } from 'typebox';
import { formatTimestamp, type Application } from '../../core/index.js';
import type { Applications } from '../../ra/accounts/applications.js';
import type { App } from '../types.js';
import { principalOf } from '../types.js';
import { bearer, okBody, responses } from './schemas.js';

// API applications over the API: an extension of the spec (whose applications are made in the
// web interface), marked as such in the OpenAPI document. ADMIN users only (the access table).

const read = { access: { area: 'users', write: false } } as const;
const write = { access: { area: 'users', write: true } } as const;
const TAG = 'applications (extension)';
const EXTENSION = 'Extension of the specification: not part of the original API.';

const ApplicationBody = Type.Object(
  {
    Name: Type.Optional(Type.String({ maxLength: 200 })),
    Scopes: Type.Optional(
      Type.Union([Type.Array(Type.String({ maxLength: 20 }), { maxItems: 20 }), Type.String({ maxLength: 200 })], {
        description: 'Required on creation: profile, limit, read, quote, order, voucher, write',
      }),
    ),
    RedirectUris: Type.Optional(
      Type.Union([Type.Array(Type.String({ maxLength: 600 }), { maxItems: 20 }), Type.String({ maxLength: 6000 })], {
        description: 'For the authorization_code flow: https URLs (http only to loopback), matched exactly',
      }),
    ),
    UserId: Type.Optional(Type.Integer({ description: "The owning user (on creation; the caller's by default)" })),
  },
  { additionalProperties: true },
);
const Params = Type.Object({ Id: Type.String({ pattern: '^[0-9]{1,10}$' }) });
const ApplicationInfo = Type.Object({
  Id: Type.Integer(),
  Name: Type.String(),
  ClientId: Type.String(),
  Scopes: Type.Array(Type.String()),
  RedirectUris: Type.Array(Type.String()),
  UserId: Type.Integer(),
  CreationDate: Type.String(),
  Revoked: Type.Boolean(),
});

const info = (a: Application) => ({
  Id: a.id,
  Name: a.name,
  ClientId: a.clientId,
  Scopes: [...a.scopes],
  RedirectUris: [...a.redirectUris],
  UserId: a.userId,
  CreationDate: formatTimestamp(a.createdAt)!,
  Revoked: a.revoked,
});

/** GET /Applications, POST /Application, POST /Application/{Id}, DELETE /Application/{Id}. */
export function registerApplications(app: App, deps: { applications: Applications }): void {
  app.get(
    '/Applications',
    {
      schema: {
        tags: [TAG],
        summary: "The account's API applications",
        description: EXTENSION,
        security: bearer,
        response: responses(okBody({ Applications: Type.Array(ApplicationInfo) })),
      },
      config: read,
    },
    async (request) => ({
      success: true as const,
      Applications: (await deps.applications.list(principalOf(request))).map(info),
    }),
  );

  app.post(
    '/Application',
    {
      schema: {
        tags: [TAG],
        summary: 'Create an API application (the secret is shown once)',
        description: EXTENSION,
        security: bearer,
        body: ApplicationBody,
        response: responses(okBody({ ...ApplicationInfo.properties, ClientSecret: Type.String() })),
      },
      config: write,
    },
    async (request) => {
      const { application, clientSecret } = await deps.applications.create(
        { principal: principalOf(request), clientAddress: request.ip },
        request.body,
      );
      return { success: true as const, ...info(application), ClientSecret: clientSecret };
    },
  );

  app.post(
    '/Application/:Id',
    {
      schema: {
        tags: [TAG],
        summary: "Change an application's name, scopes or redirect URIs (narrower scopes revoke its tokens)",
        description: EXTENSION,
        security: bearer,
        params: Params,
        body: ApplicationBody,
        response: responses(okBody({ Id: Type.Integer() })),
      },
      config: write,
    },
    async (request) => {
      const updated = await deps.applications.update(
        { principal: principalOf(request), clientAddress: request.ip },
        Number(request.params.Id),
        request.body,
      );
      return { success: true as const, Id: updated.id };
    },
  );

  app.delete(
    '/Application/:Id',
    {
      schema: {
        tags: [TAG],
        summary: 'Revoke an application and its tokens',
        description: EXTENSION,
        security: bearer,
        params: Params,
        response: responses(okBody({ Id: Type.Integer() })),
      },
      config: write,
    },
    async (request) => {
      const revoked = await deps.applications.revoke(
        { principal: principalOf(request), clientAddress: request.ip },
        Number(request.params.Id),
      );
      return { success: true as const, Id: revoked.id };
    },
  );
}
