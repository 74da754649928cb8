import {
  CertdeskError,
  SCOPES,
  applicationId as toApplicationId,
  parseScopes,
  userId as toUserId,
  type Application,
  type Clock,
  type FieldFault,
  type Principal,
  type Scope,
} from '../../core/index.js';
import type { ApplicationChanges, ApplicationsRepo, AuditRepo, TokensRepo, UsersRepo } from '../../storage/index.js';
import { insertApplication } from './accounts.js';
import { actorName, type Actor } from './actor.js';
import type { PrincipalCache } from './principal-cache.js';
import { newSecret } from './secrets.js';

// API applications managed by a customer's ADMIN users over the API (an extension of the spec,
// whose applications are made "in the web interface"): list, create (the secret shown once),
// change name, scopes and redirect URIs, revoke.

/** The body of POST /Application and POST /Application/{id} as sent: every member is checked here. */
export interface ApplicationInput {
  readonly Name?: unknown;
  readonly Scopes?: unknown;
  readonly RedirectUris?: unknown;
  readonly UserId?: unknown;
}

export interface ApplicationRepos {
  readonly applications: ApplicationsRepo;
  readonly tokens: Pick<TokensRepo, 'revokeAllOfApplication'>;
  readonly audit: Pick<AuditRepo, 'append'>;
}

export interface ApplicationsDeps extends ApplicationRepos {
  readonly users: Pick<UsersRepo, 'byId'>;
  readonly transact: <T>(fn: (repos: ApplicationRepos) => Promise<T>) => Promise<T>;
  readonly principals: Pick<PrincipalCache, 'clear'>;
  readonly clock: Clock;
}

/** At most this many redirect URIs per application. */
const MAX_REDIRECT_URIS = 10;

export class Applications {
  constructor(private readonly deps: ApplicationsDeps) {}

  /** The customer's applications, revoked ones included. */
  list(principal: Principal): Promise<Application[]> {
    return this.deps.applications.listByCustomer(principal.customerId);
  }

  /**
   * A new application of the caller's customer, owned by `UserId` (an active user of the customer;
   * the caller's user by default). Returns it with its secret, shown only now. Throws one
   * invalidInput error with every fault.
   */
  async create(actor: Actor, input: ApplicationInput): Promise<{ application: Application; clientSecret: string }> {
    const { principal } = actor;
    const faults: FieldFault[] = [];
    const bad = (field: string, message: string) => faults.push({ kind: 'invalidInput', field, message });
    const name = readName(input.Name, bad) ?? 'api';
    const scopes = readScopes(input.Scopes, bad);
    const redirectUris = input.RedirectUris === undefined ? [] : readRedirectUris(input.RedirectUris, bad);
    let owner = principal.userId;
    if (input.UserId !== undefined) {
      const id = Number(input.UserId);
      const user =
        Number.isSafeInteger(id) && id > 0 ? await this.deps.users.byId(principal.customerId, toUserId(id)) : undefined;
      if (user === undefined || !user.active) bad('UserId', 'UserId must be an active user of this account.');
      else owner = user.id;
    }
    if (faults.length > 0) throw CertdeskError.ofFaults(faults);
    const clientSecret = newSecret('cds_');
    const now = this.deps.clock.nowSeconds();
    const application = await this.deps.transact((repos) =>
      insertApplication(repos, {
        customerId: principal.customerId,
        userId: owner,
        scopes: scopes!,
        redirectUris: redirectUris ?? [],
        name,
        clientSecret,
        now,
        actor: actorName(principal),
        clientAddress: actor.clientAddress,
      }),
    );
    return { application, clientSecret };
  }

  /**
   * Changes an application's name, scopes or redirect URIs. Narrowing its scopes revokes its
   * tokens (they were minted with the old ones). Throws notFound for an unknown, revoked or other
   * customer's application; invalidInput with every fault.
   */
  async update(actor: Actor, id: number, input: ApplicationInput): Promise<Application> {
    const current = await this.find(actor.principal, id);
    const faults: FieldFault[] = [];
    const bad = (field: string, message: string) => faults.push({ kind: 'invalidInput', field, message });
    const changes: { -readonly [K in keyof ApplicationChanges]: ApplicationChanges[K] } = {};
    if (input.Name !== undefined) changes.name = readName(input.Name, bad);
    if (input.Scopes !== undefined) changes.scopes = readScopes(input.Scopes, bad);
    if (input.RedirectUris !== undefined) changes.redirectUris = readRedirectUris(input.RedirectUris, bad);
    if (input.UserId !== undefined) bad('UserId', "An application's owner cannot change: create a new application.");
    if (faults.length > 0) throw CertdeskError.ofFaults(faults);
    const narrowed = changes.scopes !== undefined && current.scopes.some((s) => !changes.scopes!.includes(s));
    const now = this.deps.clock.nowSeconds();
    const updated = await this.deps.transact(async (repos) => {
      const after = await repos.applications.update(actor.principal.customerId, current.id, changes);
      if (after === undefined) throw notFound(id);
      const revokedTokens = narrowed ? await repos.tokens.revokeAllOfApplication(current.id, now) : 0;
      await this.audit(repos, actor, now, 'application.updated', after, {
        changed: Object.keys(changes),
        scopes: after.scopes,
        redirectUris: after.redirectUris,
        revokedTokens,
      });
      return after;
    });
    if (narrowed) await this.deps.principals.clear();
    return updated;
  }

  /** Revokes an application and every token it holds. Throws notFound as `update` does. */
  async revoke(actor: Actor, id: number): Promise<Application> {
    const current = await this.find(actor.principal, id);
    const now = this.deps.clock.nowSeconds();
    await this.deps.transact(async (repos) => {
      if (!(await repos.applications.markRevoked(current.id, now))) throw notFound(id);
      const revokedTokens = await repos.tokens.revokeAllOfApplication(current.id, now);
      await this.audit(repos, actor, now, 'application.revoked', current, { revokedTokens });
    });
    await this.deps.principals.clear();
    return { ...current, revoked: true };
  }

  private async find(principal: Principal, id: number): Promise<Application> {
    const app =
      Number.isSafeInteger(id) && id > 0
        ? await this.deps.applications.byId(principal.customerId, toApplicationId(id))
        : undefined;
    if (app === undefined || app.revoked) throw notFound(id);
    return app;
  }

  private audit(
    repos: Pick<ApplicationRepos, 'audit'>,
    actor: Actor,
    at: number,
    action: string,
    app: Application,
    details: Record<string, unknown>,
  ): Promise<void> {
    return repos.audit.append({
      at,
      customerId: app.customerId,
      actor: actorName(actor.principal),
      clientAddress: actor.clientAddress,
      action,
      subject: `app:${app.clientId}`,
      details,
    });
  }
}

const notFound = (id: number) =>
  new CertdeskError('notFound', `No live application ${id} in this account.`, { field: 'Id' });

function readName(value: unknown, bad: (field: string, message: string) => void): string | undefined {
  if (value === undefined) return undefined;
  const name = typeof value === 'string' ? value.trim() : '';
  if (name === '' || name.length > 100) return void bad('Name', 'Name must be 1 to 100 characters.');
  return name;
}

/** Scopes as an array or a space- or comma-separated string: a non-empty subset of the spec's scopes. */
function readScopes(value: unknown, bad: (field: string, message: string) => void): Scope[] | undefined {
  const text = Array.isArray(value) ? value.map((v) => (typeof v === 'string' ? v : '?')).join(' ') : value;
  const { scopes, unknown } = typeof text === 'string' ? parseScopes(text) : { scopes: [], unknown: ['?'] };
  if (unknown.length > 0 || scopes.length === 0)
    return void bad('Scopes', `Scopes must be one or more of ${SCOPES.join(', ')}.`);
  return scopes;
}

/**
 * Redirect URIs (RFC 6749 §3.1.2): absolute, without a fragment, https — or http to a loopback
 * address for native applications (RFC 8252 §7.3) — each at most 512 characters, at most ten.
 */
export function readRedirectUris(value: unknown, bad: (field: string, message: string) => void): string[] | undefined {
  const list = Array.isArray(value) ? value : typeof value === 'string' ? value.split(/[\s,]+/) : undefined;
  if (list === undefined) return void bad('RedirectUris', 'RedirectUris is an array of URLs.');
  const uris = list.map((u: unknown) => (typeof u === 'string' ? u.trim() : '')).filter((u) => u !== '');
  if (uris.length > MAX_REDIRECT_URIS) return void bad('RedirectUris', `At most ${MAX_REDIRECT_URIS} redirect URIs.`);
  for (const uri of uris) {
    let url: URL | undefined;
    try {
      url = new URL(uri);
    } catch {
      url = undefined;
    }
    const loopback = url !== undefined && ['127.0.0.1', '[::1]', 'localhost'].includes(url.hostname);
    if (
      url === undefined ||
      uri.length > 512 ||
      url.hash !== '' ||
      uri.includes('#') ||
      url.username !== '' ||
      !(url.protocol === 'https:' || (url.protocol === 'http:' && loopback))
    )
      return void bad(
        'RedirectUris',
        `${uri.slice(0, 100)} is not a redirect URI: an absolute https URL (http only to a loopback address), without a fragment.`,
      );
  }
  return [...new Set(uris)];
}
