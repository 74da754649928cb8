import type { FastifyReply, FastifyRequest } from 'fastify';
import { roleAllows, type Area, type Principal, type User } from '../../../core/index.js';
import type { OAuth } from '../../../ra/accounts/oauth.js';
import type { SessionTokens } from '../../../ra/accounts/session-tokens.js';
import { tokensEqual, type SignIn, type SignedIn } from '../../../ra/accounts/sign-in.js';
import type { App } from '../../types.js';
import { escapeHtml, hidden, page, pageErrorHandler, sameOrigin, type Lang } from '../page.js';
import { cookieOf } from '../sign-in.js';
import { TEXTS, type Texts } from './texts.js';

// The signed-in customer's screens (the "console"). Every screen is rendered on the server from
// /rest/v1 answers: the handler calls the API in-process with the session's token (SessionTokens),
// so the API's scope and role checks are the only ones, and the browser holds nothing but an
// HttpOnly session cookie. Forms carry the session's CSRF token and must come from our origin.

export interface ConsoleDeps {
  readonly signIn: SignIn;
  readonly sessionTokens: SessionTokens;
  readonly oauth: Pick<OAuth, 'authenticate'>;
  /** The service's public base URL (links handed on, such as a voucher's), else the request's own origin. */
  readonly publicUrl?: string;
}

/** An answer of /rest/v1: its status, its JSON body, and the envelope's message when it failed. */
export interface ApiAnswer {
  readonly status: number;
  readonly ok: boolean;
  // The screens read the documented response shapes; the API's own schemas are the contract.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly body: any;
  readonly message: string;
}

/** One signed-in request's view of the world. */
export interface Console {
  readonly request: FastifyRequest;
  readonly lang: Lang;
  readonly t: Texts;
  readonly user: User;
  readonly csrf: string;
  readonly timeZone: string;
  /** The person as the audit log names them, with their address. */
  readonly actor: { readonly actor: string; readonly clientAddress: string | null };
  /** The service's origin, for links handed on. */
  readonly origin: string;
  /** Calls /rest/v1 as the signed-in person. */
  api(method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, body?: unknown): Promise<ApiAnswer>;
  /** The person's principal (for the few account actions the API has no route for). */
  principal(): Promise<Principal>;
  /** Whether the person's roles open an area (menus and buttons only; the API decides). */
  may(area: Area, write?: boolean): boolean;
  /** An API timestamp in the person's time zone and language. */
  date(iso: string | null | undefined): string;
  /** A link to a console path in the page's language. */
  href(path: string): string;
  /** The hidden CSRF field every form carries. */
  csrfField(): string;
}

/** The session ended under a screen (signed out elsewhere, the user deactivated, the password changed). */
class SignedOut extends Error {}

const localeLang = (locale: string | null | undefined): Lang | undefined =>
  locale?.toLowerCase().startsWith('de') ? 'de' : locale?.toLowerCase().startsWith('en') ? 'en' : undefined;

function consoleLang(request: FastifyRequest, user: User): Lang {
  const asked = (request.query as { lang?: unknown } | undefined)?.lang;
  if (asked === 'de' || asked === 'en') return asked;
  const own = localeLang(user.locale);
  if (own !== undefined) return own;
  for (const part of (request.headers['accept-language'] ?? '').split(',')) {
    const tag = localeLang(part.trim());
    if (tag !== undefined) return tag;
  }
  return 'en';
}

async function openConsole(
  app: App,
  deps: ConsoleDeps,
  request: FastifyRequest,
  cookie: string,
  signedIn: SignedIn,
): Promise<Console> {
  const token = deps.sessionTokens.tokenOf(cookie);
  const inject = (method: string, path: string, body?: unknown) =>
    app.inject({
      method: method as 'GET',
      url: `/rest/v1${path}`,
      remoteAddress: request.ip,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    });
  let activated = false;
  const api: Console['api'] = async (method, path, body) => {
    let res = await inject(method, path, body);
    // The first call of a session makes its token usable; a token revoked since stays refused.
    if (res.statusCode === 401 && !activated) {
      activated = true;
      await deps.sessionTokens.activate(signedIn, cookie, request.ip);
      res = await inject(method, path, body);
    }
    if (res.statusCode === 401) throw new SignedOut();
    let json: unknown = {};
    try {
      json = res.body === '' ? {} : JSON.parse(res.body);
    } catch {
      json = {};
    }
    const ok = res.statusCode < 300 && (json as { success?: unknown }).success !== false;
    return { status: res.statusCode, ok, body: json, message: ok ? '' : errorText(json, res.statusCode) };
  };
  const profile = await api('GET', '/Profile');
  const lang = consoleLang(request, signedIn.user);
  const timeZone = typeof profile.body.Timezone === 'string' ? profile.body.Timezone : 'UTC';
  let dates: Intl.DateTimeFormat;
  try {
    dates = new Intl.DateTimeFormat(lang === 'de' ? 'de-DE' : 'en-GB', {
      dateStyle: 'medium',
      timeStyle: 'short',
      timeZone,
    });
  } catch {
    dates = new Intl.DateTimeFormat(lang === 'de' ? 'de-DE' : 'en-GB', {
      dateStyle: 'medium',
      timeStyle: 'short',
      timeZone: 'UTC',
    });
  }
  return {
    request,
    lang,
    t: TEXTS[lang],
    user: signedIn.user,
    csrf: signedIn.session.csrf,
    timeZone,
    actor: { actor: `user:${signedIn.user.id}`, clientAddress: request.ip },
    origin:
      deps.publicUrl !== undefined && deps.publicUrl !== ''
        ? deps.publicUrl.replace(/\/$/, '')
        : `${request.protocol}://${request.host}`,
    api,
    async principal() {
      const p = await deps.oauth.authenticate(token);
      if (p === undefined) throw new SignedOut();
      return p;
    },
    may: (area, write = false) => roleAllows(signedIn.user.roles, { area, write }),
    date: (iso) => {
      if (iso === null || iso === undefined || iso === '') return '–';
      const d = new Date(iso);
      return Number.isNaN(d.getTime()) ? escapeHtml(iso) : dates.format(d);
    },
    href: (path) => `${path}${path.includes('?') ? '&' : '?'}lang=${lang}`,
    csrfField: () => hidden('csrf', signedIn.session.csrf),
  };
}

/** The envelope's message(s) of a failed answer (DESIGN §5.1), or the status. */
function errorText(json: unknown, status: number): string {
  const messages = (json as { Message?: unknown }).Message;
  const fields = (json as { Errors?: { Message?: unknown }[] }).Errors;
  if (Array.isArray(fields) && fields.length > 0)
    return fields
      .map((f) => (typeof f.Message === 'string' ? f.Message : ''))
      .filter(Boolean)
      .join(' ');
  if (typeof messages === 'string') return messages;
  if (Array.isArray(messages)) return messages.filter((m) => typeof m === 'string').join(' ');
  const message = (json as { message?: unknown }).message;
  return typeof message === 'string' ? message : `HTTP ${status}`;
}

type Handler = (c: Console, reply: FastifyReply) => Promise<FastifyReply>;

/**
 * Registers console screens: `get(path, handler)` for GETs, `post(path, handler)` for forms (the
 * session's CSRF token and our own origin are required first; a refusal changes nothing).
 */
export function consoleRoutes(app: App, deps: ConsoleDeps) {
  const options = { schema: { hide: true }, errorHandler: pageErrorHandler } as const;
  const run = async (request: FastifyRequest, reply: FastifyReply, handler: Handler, form: boolean) => {
    const cookie = cookieOf(request);
    const signedIn = await deps.signIn.session(cookie);
    // Back to the same screen after signing in (a form's answer is no screen: the overview then).
    const back = request.method === 'GET' ? request.url : '/';
    if (signedIn === undefined || cookie === undefined)
      return reply.redirect(`/signin?next=${encodeURIComponent(back)}`, 303);
    if (signedIn.needsEnrolment) return reply.redirect('/account/two-factor', 303);
    try {
      const c = await openConsole(app, deps, request, cookie, signedIn);
      if (form) {
        const csrf = (request.body as { csrf?: unknown } | undefined)?.csrf;
        if (!sameOrigin(request) || typeof csrf !== 'string' || !tokensEqual(csrf, signedIn.session.csrf))
          return consolePage(reply, c, 403, c.t.refusedTitle, `<p role="alert" class="error">${c.t.refused}</p>`);
      }
      return await handler(c, reply);
    } catch (e) {
      if (e instanceof SignedOut)
        return reply.redirect(`/signin?next=${encodeURIComponent(request.method === 'GET' ? request.url : '/')}`, 303);
      throw e;
    }
  };
  return {
    get: <P = Record<string, string>>(path: string, handler: Handler) =>
      app.get<{ Params: P }>(path, options, (request, reply) => run(request, reply, handler, false)),
    post: <P = Record<string, string>>(path: string, handler: Handler) =>
      app.post<{ Params: P }>(path, options, (request, reply) => run(request, reply, handler, true)),
  };
}

/** A console screen: the menu of what the person's roles open, a status line, the body. */
export function consolePage(
  reply: FastifyReply,
  c: Console,
  status: number,
  title: string,
  body: string,
  options: { scripts?: readonly string[] } = {},
): FastifyReply {
  const t = c.t;
  const items: [string, string, boolean][] = [
    ['/', t.dashboard, true],
    ['/order/new', t.newOrder, c.may('orders', true)],
    ['/orders', t.orders, c.may('orders')],
    ['/vouchers', t.vouchers, c.may('vouchers')],
    ['/users', t.users, c.may('users')],
    ['/applications', t.applications, c.may('users')],
    ['/keys', t.keys, c.may('users', true)],
    ['/profile', t.profile, true],
  ];
  const current = c.request.url.split('?')[0];
  const nav =
    `<nav aria-label="${t.menu}"><ul class="menu">` +
    items
      .filter(([, , shown]) => shown)
      .map(
        ([path, label]) =>
          `<li><a href="${c.href(path)}"${path === current ? ' aria-current="page"' : ''}>${label}</a></li>`,
      )
      .join('') +
    // The same screen in the other language (a form's answer is no screen: the overview then).
    `<li><a href="${escapeHtml(c.request.method === 'GET' ? (current ?? '/') : '/')}?lang=${t.otherLang}" lang="${t.otherLang}">${t.otherLangName}</a></li>` +
    `</ul><form method="post" action="/signout" class="signout">${c.csrfField()}` +
    `<span>${escapeHtml(c.user.fullName)}</span> <button type="submit" class="secondary">${t.signOut}</button></form></nav>`;
  return page(reply, status, title, body, { lang: c.lang, nav, scripts: options.scripts });
}

/** A notice after a Post/Redirect/Get (`?done=` names one of the texts' notices). */
export function notice(c: Console): string {
  const done = (c.request.query as { done?: unknown }).done;
  const text =
    typeof done === 'string' && Object.hasOwn(c.t.done, done) ? c.t.done[done as keyof Texts['done']] : undefined;
  return text === undefined ? '' : `<p class="ok" role="status">${text}</p>`;
}

/** A failure of the API, shown as the API worded it. */
export const failure = (message: string) => `<p class="error" role="alert">${escapeHtml(message)}</p>`;

/** The string value of a form field (first of repeated ones). */
export function field(request: FastifyRequest, name: string): string {
  const v = (request.body as Record<string, unknown> | undefined)?.[name];
  const first = Array.isArray(v) ? v[0] : v;
  return typeof first === 'string' ? first.trim() : '';
}

/** Every value of a repeated form field (checkboxes). */
export function fields(request: FastifyRequest, name: string): string[] {
  const v = (request.body as Record<string, unknown> | undefined)?.[name];
  return (Array.isArray(v) ? v : [v]).filter((x): x is string => typeof x === 'string');
}

/** Post/Redirect/Get: back to a console path with a notice. */
export const redirectDone = (reply: FastifyReply, c: Console, path: string, done: keyof Texts['done']) =>
  reply.redirect(`${c.href(path)}&done=${done}`, 303);
