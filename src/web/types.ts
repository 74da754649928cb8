import type {
  FastifyBaseLogger,
  FastifyInstance,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Principal, RouteAccess } from '../core/index.js';

/** The Fastify instance with TypeBox types, as every route module receives it. */
export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Who may call the route: an area and whether it writes, or `anonymous`. Unset = public ops route. */
    access?: RouteAccess | 'anonymous';
  }
  interface FastifyInstance {
    /** Every route with its access rule, in registration order. */
    accessTable: AccessEntry[];
  }
  interface FastifyRequest {
    /** The caller, resolved from the bearer token before the route runs. */
    principal?: Principal;
    /** Rate-limit bucket: the token's application (or user) for a valid token, else the client address. */
    rateKey?: string;
  }
}

export interface AccessEntry {
  readonly method: string;
  readonly url: string;
  readonly access: RouteAccess | 'anonymous';
}

/** The authenticated caller of a route whose access is not anonymous (the auth hook guarantees it). */
export function principalOf(request: { principal?: Principal }): Principal {
  if (request.principal === undefined) throw new Error('route reached without a principal');
  return request.principal;
}
