import type { FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { OAuthProblem, type OAuth } from '../../ra/accounts/oauth.js';
import { logFailure, retryAfter, toCertdeskError } from '../envelope.js';
import { secretInQuery } from '../log-redaction.js';
import type { App } from '../types.js';

const TokenBody = Type.Object(
  {
    grant_type: Type.Optional(
      Type.String({ description: '`client_credentials`, `refresh_token` or `authorization_code`' }),
    ),
    client_id: Type.Optional(Type.String()),
    client_secret: Type.Optional(Type.String()),
    scope: Type.Optional(
      Type.String({ description: 'Space-separated scopes: profile read quote write limit voucher order' }),
    ),
    refresh_token: Type.Optional(Type.String()),
    code: Type.Optional(Type.String({ maxLength: 200, description: 'authorization_code: the code' })),
    redirect_uri: Type.Optional(Type.String({ maxLength: 600, description: 'authorization_code: as in the request' })),
    code_verifier: Type.Optional(Type.String({ maxLength: 200, description: 'authorization_code: the PKCE verifier' })),
  },
  { additionalProperties: true },
);

const RevokeBody = Type.Object(
  {
    token: Type.String(),
    token_type_hint: Type.Optional(Type.String()),
    client_id: Type.Optional(Type.String()),
    client_secret: Type.Optional(Type.String()),
  },
  { additionalProperties: true },
);

const TokenResponse = Type.Object({
  access_token: Type.String(),
  token_type: Type.Literal('Bearer'),
  expires_in: Type.Integer(),
  refresh_token: Type.String(),
  scope: Type.String(),
});

/** Client credentials from HTTP Basic (RFC 6749 §2.3.1) or, failing that, the body. */
function clientOf(request: FastifyRequest, body: { client_id?: string; client_secret?: string }) {
  const auth = request.headers.authorization;
  const m = auth === undefined ? null : /^Basic[ \t]+([A-Za-z0-9+/=]+)\s*$/i.exec(auth);
  if (m?.[1] !== undefined) {
    const decoded = Buffer.from(m[1], 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon > 0) {
      let credentials: { clientId: string; clientSecret: string };
      try {
        credentials = {
          clientId: decodeURIComponent(decoded.slice(0, colon)),
          clientSecret: decodeURIComponent(decoded.slice(colon + 1)),
        };
      } catch {
        throw new OAuthProblem('invalid_client', 'the Basic credentials are not properly percent-encoded');
      }
      // The body's NULs are refused before the route (refuse-nul.ts); the header's are refused here.
      if (credentials.clientId.includes('\0') || credentials.clientSecret.includes('\0'))
        throw new OAuthProblem('invalid_client', 'the Basic credentials must not contain a NUL character (U+0000)');
      return credentials;
    }
  }
  return { clientId: body.client_id, clientSecret: body.client_secret };
}

/** Token-endpoint errors are RFC 6749 §5.2 bodies, not the REST envelope. */
function oauthError(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  void reply.header('cache-control', 'no-store');
  if (error instanceof OAuthProblem) {
    if (error.status === 401) void reply.header('www-authenticate', 'Basic realm="certdesk"');
    return reply.code(error.status).send({ error: error.code, error_description: error.message });
  }
  const err = toCertdeskError(error);
  if (err.kind === 'internal') {
    logFailure(request, err, error, 'token endpoint');
    return reply.code(500).send({ error: 'server_error', error_description: 'Internal server error.' });
  }
  const retry = retryAfter(err, error);
  if (retry !== undefined) void reply.header('retry-after', retry);
  if (err.kind === 'notReady') {
    logFailure(request, err, error, 'token endpoint');
    // The authorization endpoint's word for it (RFC 6749 §4.1.2.1); §5.2 has none for a 503.
    return reply.code(503).send({ error: 'temporarily_unavailable', error_description: err.message });
  }
  if (err.kind === 'rateLimited' || err.kind === 'payloadTooLarge') {
    const status = err.kind === 'rateLimited' ? 429 : 413;
    return reply.code(status).send({ error: 'invalid_request', error_description: err.message });
  }
  return reply.code(400).send({ error: 'invalid_request', error_description: err.message });
}

/**
 * RFC 6749 §2.3.1: client credentials MUST NOT be in the request URI (and neither may tokens:
 * URLs end up in proxy, browser and access logs). A request with a secret-named parameter in its
 * query is refused with `invalid_request` before anything is authenticated; nothing in the query is read.
 */
async function refuseSecretsInQuery(request: FastifyRequest): Promise<void> {
  const param = secretInQuery(request.query);
  if (param === undefined) return;
  throw new OAuthProblem(
    'invalid_request',
    `${param} must not be sent in the URL query (RFC 6749 §2.3.1): send it in the request body or, for client credentials, with HTTP Basic; replace a secret that was sent in a URL`,
  );
}

/**
 * POST /oauth2/token (form or JSON) and POST /oauth2/revoke (RFC 7009). Parameters come from
 * the body (client credentials also from HTTP Basic); secrets in the query are refused.
 */
export function registerOAuth(app: App, deps: { oauth: OAuth }): void {
  app.register(async (plugin) => {
    const scope = plugin.withTypeProvider<TypeBoxTypeProvider>();
    scope.setErrorHandler(oauthError);
    scope.addHook('onRequest', refuseSecretsInQuery);
    scope.post(
      '/oauth2/token',
      {
        schema: {
          tags: ['oauth2'],
          summary: 'Obtain an access token',
          body: TokenBody,
          response: { 200: TokenResponse },
        },
        config: { access: 'anonymous' },
      },
      async (request, reply) => {
        const body = request.body;
        const client = clientOf(request, body);
        const tokens = await deps.oauth.token(
          {
            grantType: body.grant_type,
            scope: body.scope,
            refreshToken: body.refresh_token,
            code: body.code,
            redirectUri: body.redirect_uri,
            codeVerifier: body.code_verifier,
            ...client,
          },
          request.ip,
        );
        return reply.header('cache-control', 'no-store').header('pragma', 'no-cache').send(tokens);
      },
    );
    scope.post(
      '/oauth2/revoke',
      {
        schema: { tags: ['oauth2'], summary: 'Revoke a token (RFC 7009)', body: RevokeBody },
        config: { access: 'anonymous' },
      },
      async (request, reply) => {
        await deps.oauth.revoke({ token: request.body.token, ...clientOf(request, request.body) }, request.ip);
        return reply.header('cache-control', 'no-store').send({});
      },
    );
  });
}
