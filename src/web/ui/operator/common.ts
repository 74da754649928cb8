import type { FastifyReply, FastifyRequest } from 'fastify';
import { isCertdeskError, systemClock, type Clock } from '../../../core/index.js';
import type { OperatorConsole, OperatorActor } from '../../../ra/operators/operator-console.js';
import type { Operators } from '../../../ra/operators/operators.js';
import type { OperatorSession } from '../../../storage/index.js';
import type { App } from '../../types.js';
import { escapeHtml, hidden, langOf, page, pageErrorHandler, sameOrigin, type Lang } from '../page.js';

// What every operator screen shares: the cookie (Path=/operator, HttpOnly, SameSite=Strict), the
// frame with the operator menu, readable dates, and the guard of every form post (a full session,
// our own origin, the session's CSRF token), which ends in Post/Redirect/Get or an error page.

export const OPERATOR_COOKIE = 'certdesk_operator';

export interface OperatorPageDeps {
  readonly operators: Operators;
  readonly operatorConsole: OperatorConsole;
  readonly clock?: Clock;
  readonly secureCookies: boolean;
}

export const ROUTE = { schema: { hide: true }, config: {}, errorHandler: pageErrorHandler } as const;

const TEXT = {
  en: {
    menu: 'Operator menu',
    overview: 'Overview',
    customers: 'Customers',
    vetting: 'Vetting',
    ca: 'CA status',
    mail: 'Mail',
    jobs: 'Failed jobs',
    signOut: 'Sign out',
    as: 'Signed in as',
    refused: 'Refused',
    refusedText:
      'This form was not sent from this site or has expired: nothing was changed. Reload the page and try again.',
    nothing: 'Nothing changed',
    back: 'Back',
    language: 'Language',
  },
  de: {
    menu: 'Betreiber-Menü',
    overview: 'Übersicht',
    customers: 'Kunden',
    vetting: 'Prüfung',
    ca: 'CA-Status',
    mail: 'E-Mails',
    jobs: 'Fehlgeschlagene Jobs',
    signOut: 'Abmelden',
    as: 'Angemeldet als',
    refused: 'Abgelehnt',
    refusedText:
      'Dieses Formular wurde nicht von dieser Seite gesendet oder ist abgelaufen: Es wurde nichts geändert. Laden Sie die Seite neu und versuchen Sie es noch einmal.',
    nothing: 'Nichts geändert',
    back: 'Zurück',
    language: 'Sprache',
  },
} as const;

const MENU = [
  ['/operator', 'overview'],
  ['/operator/customers', 'customers'],
  ['/operator/vetting', 'vetting'],
  ['/operator/ca', 'ca'],
  ['/operator/mail', 'mail'],
  ['/operator/jobs', 'jobs'],
] as const;

/** The operator session cookie of a request, if any (a customer's session cookie is another name). */
export function operatorCookie(request: FastifyRequest): string | undefined {
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === OPERATOR_COOKIE) return value.join('=');
  }
  return undefined;
}

export function setOperatorCookie(reply: FastifyReply, value: string, maxAge: number, secure: boolean): FastifyReply {
  return reply.header(
    'set-cookie',
    `${OPERATOR_COOKIE}=${value}; Path=/operator; HttpOnly; SameSite=Strict; Max-Age=${maxAge}${secure ? '; Secure' : ''}`,
  );
}

/** A form posting to an operator path, with the session's CSRF token and the page language. */
export function form(session: OperatorSession, lang: Lang, action: string, inner: string, attrs = ''): string {
  return `<form method="post" action="${action}?lang=${lang}"${attrs}>${hidden('csrf', session.csrf)}${inner}</form>`;
}

/** A signed-in operator screen: the menu (the current entry marked), then `body`. */
export function operatorPage(
  reply: FastifyReply,
  status: number,
  lang: Lang,
  session: OperatorSession,
  current: string,
  title: string,
  body: string,
): FastifyReply {
  const t = TEXT[lang];
  const other = lang === 'en' ? 'de' : 'en';
  const items = MENU.map(
    ([path, key]) =>
      `<li><a href="${path}?lang=${lang}"${path === current ? ' aria-current="page"' : ''}>${t[key]}</a></li>`,
  ).join('');
  const menu =
    `<nav class="operator" aria-label="${t.menu}"><ul>${items}</ul>` +
    form(session, lang, '/operator/signout', `<button type="submit" class="secondary">${t.signOut}</button>`) +
    `<p class="muted">${t.as} <strong>${escapeHtml(session.operator.username)}</strong> · ` +
    `<a href="${current}?lang=${other}" lang="${other}">${other === 'de' ? 'Deutsch' : 'English'}</a></p></nav>`;
  return page(reply, status, title, body, { lang, nav: menu });
}

/** A date as people read it, in UTC, marked up with its machine-readable form. */
export function when(lang: Lang, seconds: number | null): string {
  if (seconds === null) return '–';
  const date = new Date(seconds * 1000);
  const shown = new Intl.DateTimeFormat(lang === 'de' ? 'de-DE' : 'en-GB', {
    dateStyle: 'medium',
    timeStyle: 'short',
    timeZone: 'UTC',
  }).format(date);
  return `<time datetime="${date.toISOString().replace(/\.\d{3}Z$/, 'Z')}">${escapeHtml(shown)} UTC</time>`;
}

/** How long ago (or ahead) `seconds` is from `now`: "3 hours ago", "in 2 days". */
export function relative(lang: Lang, seconds: number, now: number): string {
  const d = seconds - now;
  const abs = Math.abs(d);
  const [value, unit]: [number, Intl.RelativeTimeFormatUnit] =
    abs < 90
      ? [d, 'second']
      : abs < 5400
        ? [d / 60, 'minute']
        : abs < 172_800
          ? [d / 3600, 'hour']
          : [d / 86_400, 'day'];
  return new Intl.RelativeTimeFormat(lang, { numeric: 'auto' }).format(Math.round(value), unit);
}

/** The status line after a Post/Redirect/Get, announced to screen readers. */
export const statusLine = (text: string | undefined) =>
  text === undefined ? '' : `<p class="ok" role="status">${escapeHtml(text)}</p>`;

export const nowOf = (deps: OperatorPageDeps) => (deps.clock ?? systemClock).nowSeconds();

/** Registers a GET screen for signed-in operators; others go to the sign-in page. */
export function operatorGet(
  app: App,
  deps: OperatorPageDeps,
  path: string,
  render: (request: FastifyRequest, reply: FastifyReply, session: OperatorSession, lang: Lang) => Promise<FastifyReply>,
): void {
  app.get(path, ROUTE, async (request, reply) => {
    const lang = langOf(request);
    const session = await deps.operators.session(operatorCookie(request));
    if (session === undefined) return reply.redirect(`/operator/signin?lang=${lang}`, 303);
    return render(request, reply, session, lang);
  });
}

/**
 * Registers a form post of signed-in operators: without a full session it goes to the sign-in
 * page; from another origin or without the session's CSRF token it is refused (403) before
 * anything runs. `act` returns where to go next (Post/Redirect/Get); a domain error (bad input,
 * unknown, changed meanwhile) becomes an error page that says nothing was changed.
 */
export function operatorPost(
  app: App,
  deps: OperatorPageDeps,
  path: string,
  act: (
    body: Record<string, unknown>,
    actor: OperatorActor,
    lang: Lang,
    request: FastifyRequest,
    reply: FastifyReply,
    session: OperatorSession,
  ) => Promise<string | FastifyReply>,
): void {
  app.post(path, ROUTE, async (request, reply) => {
    const lang = langOf(request);
    const t = TEXT[lang];
    const session = await deps.operators.session(operatorCookie(request));
    if (session === undefined) return reply.redirect(`/operator/signin?lang=${lang}`, 303);
    const body = (request.body ?? {}) as Record<string, unknown>;
    if (!sameOrigin(request) || !deps.operators.csrfMatches(session, body.csrf))
      return page(reply, 403, t.refused, `<p class="error" role="alert">${t.refusedText}</p>`, { lang });
    const actor = { username: session.operator.username, clientAddress: request.ip };
    try {
      const next = await act(body, actor, lang, request, reply, session);
      return typeof next === 'string' ? reply.redirect(next, 303) : next;
    } catch (e) {
      const status = isCertdeskError(e) ? ERROR_STATUS[e.kind] : undefined;
      if (status === undefined || !isCertdeskError(e)) throw e;
      const back = path.split('/').slice(0, 3).join('/');
      return operatorPage(
        reply,
        status,
        lang,
        session,
        back,
        t.nothing,
        `<p class="error" role="alert">${escapeHtml(e.message)}</p><p><a href="${back}?lang=${lang}">${t.back}</a></p>`,
      );
    }
  });
}

const ERROR_STATUS: Partial<Record<string, number>> = {
  invalidInput: 400,
  malformedRequest: 400,
  notFound: 404,
  orderNotFound: 404,
  conflict: 409,
  invalidOrderState: 409,
};

/** A positive whole number from a form or query field; undefined otherwise. */
export function positiveId(value: unknown): number | undefined {
  return typeof value === 'string' && /^[1-9][0-9]{0,14}$/.test(value.trim()) ? Number(value.trim()) : undefined;
}

/** A string field of a form ('' when absent), at most `max` characters. */
export const field = (body: Record<string, unknown>, name: string, max = 500): string =>
  typeof body[name] === 'string' ? (body[name] as string).slice(0, max) : '';
