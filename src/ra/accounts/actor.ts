import type { Principal } from '../../core/index.js';

/** The request context of a write: who, from where (for the audit log). */
export interface Actor {
  readonly principal: Principal;
  readonly clientAddress: string | null;
}

/** How the audit log names a caller: `user:<id>` or `app:<client id>`. */
export function actorName(principal: Principal): string {
  return principal.userId !== null ? `user:${principal.userId}` : `app:${principal.applicationId ?? '?'}`;
}
