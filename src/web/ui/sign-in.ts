import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  AuthorizeProblem,
  foreignApplication,
  tokensEqual,
  type AuthorizeParams,
  type AuthorizeRequest,
  type SignIn,
} from '../../ra/accounts/sign-in.js';
import type { SessionTokens } from '../../ra/accounts/session-tokens.js';
import type { App } from '../types.js';
import { escapeHtml, hidden, langOf, page, pageErrorHandler, sameOrigin, type Lang } from './page.js';

// Sign-in for people and the authorization endpoint (RFC 6749 §4.1): GET/POST /signin,
// POST /signout, GET /account, GET/POST /oauth2/authorize. The session lives in an HttpOnly,
// SameSite=Lax cookie; forms carry the session's CSRF token and must come from our own origin.

export const COOKIE = 'certdesk_session';

const TEXT = {
  en: {
    signIn: 'Sign in',
    username: 'Username',
    password: 'Password',
    failed: 'Sign-in failed: the username or the password is not right.',
    refused: 'This form was not sent from this site.',
    account: 'Your account',
    signedInAs: 'Signed in as',
    signOut: 'Sign out',
    consent: 'Allow access?',
    wants: 'wants to act for you with these rights:',
    allow: 'Allow',
    deny: 'Deny',
    badRequest: 'This request cannot be answered',
    twoFactorOn: 'Two-factor sign-in is on',
    twoFactorOff: 'Turn on two-factor sign-in',
    throttled: (s: number) => `Too many failed attempts: try again in ${s} s.`,
  },
  de: {
    signIn: 'Anmelden',
    username: 'Benutzername',
    password: 'Passwort',
    failed: 'Anmeldung fehlgeschlagen: Benutzername oder Passwort stimmen nicht.',
    refused: 'Dieses Formular wurde nicht von dieser Seite gesendet.',
    account: 'Ihr Konto',
    signedInAs: 'Angemeldet als',
    signOut: 'Abmelden',
    consent: 'Zugriff erlauben?',
    wants: 'möchte mit diesen Rechten für Sie handeln:',
    allow: 'Erlauben',
    deny: 'Ablehnen',
    badRequest: 'Diese Anfrage kann nicht beantwortet werden',
    twoFactorOn: 'Anmeldung mit zweitem Faktor ist aktiv',
    twoFactorOff: 'Anmeldung mit zweitem Faktor einschalten',
    throttled: (s: number) => `Zu viele Fehlversuche: Versuchen Sie es in ${s} s wieder.`,
  },
} as const satisfies Record<Lang, Record<string, string | ((s: number) => string)>>;

/** The session cookie of a request, if any. */
export function cookieOf(request: FastifyRequest): string | undefined {
  const header = request.headers.cookie;
  if (header === undefined) return undefined;
  for (const part of header.split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === COOKIE) return value.join('=');
  }
  return undefined;
}

/** Where to go after signing in: a path of this site only (no open redirect). */
export function localPath(next: unknown): string {
  return typeof next === 'string' && /^\/(?![/\\])[\x21-\x7e]{0,2000}$/.test(next) ? next : '/';
}

const AUTHORIZE_PARAMS = [
  'response_type',
  'client_id',
  'redirect_uri',
  'scope',
  'state',
  'code_challenge',
  'code_challenge_method',
] as const;

/** The authorize parameters of a query or form, strings only. */
function authorizeParams(source: unknown): AuthorizeParams {
  const out: Record<string, string> = {};
  for (const k of AUTHORIZE_PARAMS) {
    const v = (source as Record<string, unknown> | undefined)?.[k];
    if (typeof v === 'string') out[k] = v;
  }
  return out;
}

/** `uri` with `params` added to its query (RFC 6749 §4.1.2: the redirect keeps the URI's own query). */
function withParams(uri: string, params: Record<string, string | undefined>): string {
  const url = new URL(uri);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, v);
  return url.toString();
}

export function registerSignIn(
  app: App,
  deps: { signIn: SignIn; sessionTokens: Pick<SessionTokens, 'revoke'>; secureCookies: boolean },
): void {
  const options = { schema: { hide: true }, config: {}, errorHandler: pageErrorHandler } as const;
  const setCookie = (reply: FastifyReply, value: string, maxAge: number) =>
    reply.header(
      'set-cookie',
      `${COOKIE}=${value}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${maxAge}${deps.secureCookies ? '; Secure' : ''}`,
    );

  const signInForm = (reply: FastifyReply, lang: Lang, next: string, error?: { status: number; text: string }) => {
    const t = TEXT[lang];
    return page(
      reply,
      error?.status ?? 200,
      t.signIn,
      (error === undefined ? '' : `<p class="error" role="alert">${escapeHtml(error.text)}</p>`) +
        `<form method="post" action="/signin?lang=${lang}">${hidden('next', next)}` +
        `<label for="u">${t.username}</label><input id="u" name="username" autocomplete="username" required maxlength="64">` +
        `<label for="p">${t.password}</label><input id="p" name="password" type="password" autocomplete="current-password" required maxlength="1024">` +
        `<p><button type="submit">${t.signIn}</button></p></form>`,
      { lang },
    );
  };

  app.get('/signin', options, async (request, reply) =>
    signInForm(reply, langOf(request), localPath((request.query as { next?: unknown }).next)),
  );

  app.post('/signin', options, async (request, reply) => {
    const lang = langOf(request);
    const body = (request.body ?? {}) as { username?: unknown; password?: unknown; next?: unknown };
    const next = localPath(body.next);
    if (!sameOrigin(request)) return signInForm(reply, lang, next, { status: 403, text: TEXT[lang].refused });
    const username = typeof body.username === 'string' ? body.username.trim() : '';
    const password = typeof body.password === 'string' ? body.password : '';
    const signedIn = await deps.signIn.signIn(username, password, request.ip);
    if (signedIn.kind === 'throttled')
      return signInForm(reply.header('retry-after', String(signedIn.retryAfter)), lang, next, {
        status: 429,
        text: TEXT[lang].throttled(signedIn.retryAfter),
      });
    if (signedIn.kind === 'failed') return signInForm(reply, lang, next, { status: 401, text: TEXT[lang].failed });
    setCookie(reply, signedIn.cookie, 8 * 3600);
    if (signedIn.secondFactor) return reply.redirect(`/signin/code?lang=${lang}&next=${encodeURIComponent(next)}`, 303);
    return reply.redirect(next, 303);
  });

  app.get('/account', options, async (request, reply) => {
    const lang = langOf(request);
    const signedIn = await deps.signIn.session(cookieOf(request));
    if (signedIn === undefined) return reply.redirect(`/signin?next=${encodeURIComponent('/account')}`, 303);
    if (signedIn.needsEnrolment) return reply.redirect('/account/two-factor', 303);
    const t = TEXT[lang];
    return page(
      reply,
      200,
      t.account,
      `<p>${t.signedInAs} <strong>${escapeHtml(signedIn.user.fullName)}</strong> (${escapeHtml(signedIn.user.username)}).</p>` +
        `<p><a href="/account/two-factor?lang=${lang}">${signedIn.user.twoFactorEnabled ? t.twoFactorOn : t.twoFactorOff}</a></p>` +
        `<form method="post" action="/signout">${hidden('csrf', signedIn.session.csrf)}<button type="submit">${t.signOut}</button></form>`,
      { lang },
    );
  });

  app.post('/signout', options, async (request, reply) => {
    const cookie = cookieOf(request);
    const signedIn = await deps.signIn.session(cookie);
    const csrf = (request.body as { csrf?: unknown } | undefined)?.csrf;
    if (
      signedIn !== undefined &&
      cookie !== undefined &&
      sameOrigin(request) &&
      typeof csrf === 'string' &&
      tokensEqual(csrf, signedIn.session.csrf)
    ) {
      await deps.signIn.signOut(cookie);
      await deps.sessionTokens.revoke(cookie);
    }
    return setCookie(reply, '', 0).redirect('/signin', 303);
  });

  /** RFC 6749 §4.1.2.1: a bad client or redirect URI is shown; anything else goes back to the client. */
  const refuse = (reply: FastifyReply, lang: Lang, e: AuthorizeProblem, redirectUri?: string, state?: string) =>
    e.redirectable && redirectUri !== undefined
      ? reply.redirect(withParams(redirectUri, { error: e.code, error_description: e.message, state }), 302)
      : page(reply, 400, TEXT[lang].badRequest, `<p>${escapeHtml(e.message)}</p>`, { lang });

  const consentPage = (
    reply: FastifyReply,
    lang: Lang,
    req: AuthorizeRequest,
    csrf: string,
    params: AuthorizeParams,
  ) => {
    const t = TEXT[lang];
    const fields = AUTHORIZE_PARAMS.map((k) => hidden(k, params[k])).join('') + hidden('csrf', csrf);
    return page(
      reply,
      200,
      t.consent,
      `<p><strong>${escapeHtml(req.application.name)}</strong> ${t.wants}</p>` +
        `<ul>${req.scopes.map((s) => `<li><code>${escapeHtml(s)}</code></li>`).join('')}</ul>` +
        `<form method="post" action="/oauth2/authorize?lang=${lang}">${fields}` +
        `<button type="submit" name="decision" value="allow">${t.allow}</button> ` +
        `<button type="submit" name="decision" value="deny">${t.deny}</button></form>`,
      { lang, formAction: [new URL(req.redirectUri).origin] },
    );
  };

  app.get('/oauth2/authorize', options, async (request, reply) => {
    const lang = langOf(request);
    const params = authorizeParams(request.query);
    let req: AuthorizeRequest;
    try {
      req = await deps.signIn.checkRequest(params);
    } catch (e) {
      if (!(e instanceof AuthorizeProblem)) throw e;
      return refuse(reply, lang, e, params.redirect_uri, params.state);
    }
    const signedIn = await deps.signIn.session(cookieOf(request));
    if (signedIn === undefined) return reply.redirect(`/signin?next=${encodeURIComponent(request.url)}`, 303);
    if (signedIn.needsEnrolment)
      return reply.redirect(`/account/two-factor?next=${encodeURIComponent(request.url)}`, 303);
    const foreign = foreignApplication(signedIn, req);
    if (foreign !== undefined) return refuse(reply, lang, foreign);
    return consentPage(reply, lang, req, signedIn.session.csrf, params);
  });

  app.post('/oauth2/authorize', options, async (request, reply) => {
    const lang = langOf(request);
    const body = (request.body ?? {}) as Record<string, unknown>;
    const params = authorizeParams(body);
    let req: AuthorizeRequest;
    try {
      req = await deps.signIn.checkRequest(params);
    } catch (e) {
      if (!(e instanceof AuthorizeProblem)) throw e;
      return refuse(reply, lang, e, params.redirect_uri, params.state);
    }
    const signedIn = await deps.signIn.session(cookieOf(request));
    if (signedIn === undefined || !sameOrigin(request))
      return page(reply, 403, TEXT[lang].badRequest, `<p>${TEXT[lang].refused}</p>`, { lang });
    if (body.decision !== 'allow')
      return reply.redirect(withParams(req.redirectUri, { error: 'access_denied', state: req.state }), 302);
    try {
      const code = await deps.signIn.approve(
        signedIn,
        req,
        typeof body.csrf === 'string' ? body.csrf : undefined,
        request.ip,
      );
      return reply.redirect(withParams(req.redirectUri, { code, state: req.state }), 302);
    } catch (e) {
      if (!(e instanceof AuthorizeProblem)) throw e;
      return refuse(reply, lang, e);
    }
  });
}
