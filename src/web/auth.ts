import { CertdeskError, roleAllows, scopeAllows, type Principal, type RouteAccess } from '../core/index.js';
import type { FastifyRequest } from 'fastify';
import type { OAuth } from '../ra/accounts/oauth.js';
import type { App } from './types.js';

/** Extracts the token of `Authorization: Bearer <token>`; undefined when absent or malformed. */
export function bearerOf(header: string | undefined): string | undefined {
  if (header === undefined || header.length < 8 || header.length > 600) return undefined;
  if (header.slice(0, 7).toLowerCase() !== 'bearer ') return undefined;
  const token = header.slice(7).trim();
  return /^[\x21-\x7e]{1,512}$/.test(token) ? token : undefined;
}

/**
 * Resolves the bearer token on every route that needs one (onRequest, before the rate limiter
 * picks a bucket). Failure is not raised here, so that bad tokens are rate-limited by address.
 */
export function addAuthResolution(app: App, oauth: Pick<OAuth, 'authenticate' | 'knownPrincipal'>): void {
  const resolved = (request: FastifyRequest, principal: Principal | undefined): void => {
    if (principal === undefined) return;
    request.principal = principal;
    // One bucket per application (or per user for UI tokens): minting more tokens buys no more.
    request.rateKey = principal.applicationId === null ? `u:${principal.userId}` : `p:${principal.applicationId}`;
  };
  // Callback hooks, not async ones: every request passes here, and most need no promise (a
  // token seen in the last minutes is answered from the principal cache at once).
  app.addHook('onRequest', (request, _reply, done) => {
    const access = request.routeOptions.config.access;
    if (access === undefined || access === 'anonymous') return done();
    const bearer = bearerOf(request.headers.authorization);
    if (bearer === undefined) return done();
    const known = oauth.knownPrincipal(bearer);
    if (known !== undefined) {
      resolved(request, known);
      return done();
    }
    oauth.authenticate(bearer).then((principal) => {
      resolved(request, principal);
      done();
    }, done);
  });
}

/**
 * Enforces authentication, scope and role (preParsing: after the rate limiter, before the body
 * is read). 401 without a valid token; 403 when token scopes ∩ user roles do not cover the route.
 */
export function addAuthEnforcement(app: App): void {
  app.addHook('preParsing', (request, _reply, payload, done) => {
    const refusal = accessRefusal(request.principal, request.routeOptions.config.access);
    if (refusal === undefined) done(null, payload);
    else done(refusal);
  });
}

/** Why `principal` may not call a route with `access`, or undefined when it may. */
function accessRefusal(
  principal: Principal | undefined,
  access: RouteAccess | 'anonymous' | undefined,
): CertdeskError | undefined {
  if (access === undefined || access === 'anonymous') return undefined;
  if (principal === undefined) return new CertdeskError('unauthenticated');
  if (!scopeAllows(principal.scopes, access)) {
    return new CertdeskError(
      'forbidden',
      `Authorization failed: the token's scopes (${principal.scopes.join(' ')}) do not include this request.`,
    );
  }
  if (!roleAllows(principal.roles, access)) {
    return new CertdeskError(
      'forbidden',
      `Authorization failed: the user's roles (${principal.roles.join(', ') || 'none'}) do not allow this request.`,
    );
  }
  return undefined;
}
