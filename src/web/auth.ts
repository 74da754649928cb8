import { CertdeskError, roleAllows, scopeAllows } from '../core/index.js';
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
export function addAuthResolution(app: App, oauth: Pick<OAuth, 'authenticate'>): void {
  app.addHook('onRequest', async (request) => {
    const access = request.routeOptions.config.access;
    if (access === undefined || access === 'anonymous') return;
    const bearer = bearerOf(request.headers.authorization);
    if (bearer === undefined) return;
    const principal = await oauth.authenticate(bearer);
    if (principal !== undefined) {
      request.principal = principal;
      // One bucket per application (or per user for UI tokens): minting more tokens buys no more.
      request.rateKey = principal.applicationId === null ? `u:${principal.userId}` : `p:${principal.applicationId}`;
    }
  });
}

/**
 * Enforces authentication, scope and role (preParsing: after the rate limiter, before the body
 * is read). 401 without a valid token; 403 when token scopes ∩ user roles do not cover the route.
 */
export function addAuthEnforcement(app: App): void {
  app.addHook('preParsing', async (request) => {
    const access = request.routeOptions.config.access;
    if (access === undefined || access === 'anonymous') return;
    const principal = request.principal;
    if (principal === undefined) throw new CertdeskError('unauthenticated');
    if (!scopeAllows(principal.scopes, access)) {
      throw new CertdeskError(
        'forbidden',
        `Authorization failed: the token's scopes (${principal.scopes.join(' ')}) do not include this request.`,
      );
    }
    if (!roleAllows(principal.roles, access)) {
      throw new CertdeskError(
        'forbidden',
        `Authorization failed: the user's roles (${principal.roles.join(', ') || 'none'}) do not allow this request.`,
      );
    }
  });
}
