import type { FastifyReply } from 'fastify';
import { OPERATOR_SESSION_SECONDS } from '../../../ra/operators/operators.js';
import type { App } from '../../types.js';
import { escapeHtml, hidden, langOf, page, sameOrigin, type Lang } from '../page.js';
import {
  operatorCookie,
  operatorGet,
  operatorPage,
  ROUTE,
  setOperatorCookie,
  type OperatorPageDeps,
} from './common.js';

// Operators sign in with a password and then, always, a TOTP code: GET/POST /operator/signin,
// GET/POST /operator/signin/code, POST /operator/signout; and the overview, GET /operator.

const TEXT = {
  en: {
    signIn: 'Operator sign-in',
    username: 'Username',
    password: 'Password',
    next: 'Continue',
    code: 'Operator sign-in: code',
    codeLabel: 'Code from your authenticator app',
    failed: 'Sign-in failed: the username or the password is not right.',
    codeFailed: 'Sign-in failed: the code is not right.',
    refused: 'This form was not sent from this site.',
    throttled: (s: number) => `Too many failed attempts: try again in ${s} s.`,
    overview: 'Operator overview',
    waiting: (n: number) => `${n} order(s) waiting for vetting`,
    dead: (n: number) => `${n} failed job(s)`,
    customers: (n: number) => `${n} customer(s)`,
    ca: 'CA status: issuers, keys, CRLs, distrust marks',
    mail: 'The mail outbox',
  },
  de: {
    signIn: 'Betreiber-Anmeldung',
    username: 'Benutzername',
    password: 'Passwort',
    next: 'Weiter',
    code: 'Betreiber-Anmeldung: Code',
    codeLabel: 'Code aus Ihrer Authenticator-App',
    failed: 'Anmeldung fehlgeschlagen: Benutzername oder Passwort stimmen nicht.',
    codeFailed: 'Anmeldung fehlgeschlagen: Der Code stimmt nicht.',
    refused: 'Dieses Formular wurde nicht von dieser Seite gesendet.',
    throttled: (s: number) => `Zu viele Fehlversuche: Versuchen Sie es in ${s} s wieder.`,
    overview: 'Betreiber-Übersicht',
    waiting: (n: number) => `${n} Bestellung(en) warten auf Prüfung`,
    dead: (n: number) => `${n} fehlgeschlagene(r) Job(s)`,
    customers: (n: number) => `${n} Kunde(n)`,
    ca: 'CA-Status: Aussteller, Schlüssel, Sperrlisten, Misstrauensmarken',
    mail: 'Der E-Mail-Ausgang',
  },
} as const;

type Problem = { status: number; text: string };
const alert = (p?: Problem) => (p === undefined ? '' : `<p class="error" role="alert">${escapeHtml(p.text)}</p>`);

export function registerOperatorSignIn(app: App, deps: OperatorPageDeps): void {
  const passwordForm = (reply: FastifyReply, lang: Lang, problem?: Problem) => {
    const t = TEXT[lang];
    return page(
      reply,
      problem?.status ?? 200,
      t.signIn,
      alert(problem) +
        `<form method="post" action="/operator/signin?lang=${lang}">` +
        `<label for="u">${t.username}</label><input id="u" name="username" autocomplete="username" required maxlength="64" autofocus>` +
        `<label for="p">${t.password}</label><input id="p" name="password" type="password" autocomplete="current-password" required maxlength="1024">` +
        `<p><button type="submit">${t.next}</button></p></form>`,
      { lang },
    );
  };
  const codeForm = (reply: FastifyReply, lang: Lang, csrf: string, problem?: Problem) => {
    const t = TEXT[lang];
    return page(
      reply,
      problem?.status ?? 200,
      t.code,
      alert(problem) +
        `<form method="post" action="/operator/signin/code?lang=${lang}">${hidden('csrf', csrf)}` +
        `<label for="c">${t.codeLabel}</label><input id="c" name="code" autocomplete="one-time-code" inputmode="numeric" required maxlength="8" autofocus>` +
        `<p><button type="submit">${t.next}</button></p></form>`,
      { lang },
    );
  };

  app.get('/operator/signin', ROUTE, async (request, reply) => passwordForm(reply, langOf(request)));

  app.post('/operator/signin', ROUTE, async (request, reply) => {
    const lang = langOf(request);
    const t = TEXT[lang];
    if (!sameOrigin(request)) return passwordForm(reply, lang, { status: 403, text: t.refused });
    const body = (request.body ?? {}) as { username?: unknown; password?: unknown };
    const username = typeof body.username === 'string' ? body.username.trim().toLowerCase().slice(0, 64) : '';
    const password = typeof body.password === 'string' ? body.password : '';
    const result = await deps.operators.signIn(username, password, request.ip);
    if (result.kind === 'throttled')
      return passwordForm(reply.header('retry-after', String(result.retryAfter)), lang, {
        status: 429,
        text: t.throttled(result.retryAfter),
      });
    if (result.kind === 'failed') return passwordForm(reply, lang, { status: 401, text: t.failed });
    setOperatorCookie(reply, result.cookie, OPERATOR_SESSION_SECONDS, deps.secureCookies);
    return reply.redirect(`/operator/signin/code?lang=${lang}`, 303);
  });

  app.get('/operator/signin/code', ROUTE, async (request, reply) => {
    const lang = langOf(request);
    const pending = await deps.operators.pendingSession(operatorCookie(request));
    if (pending === undefined) return reply.redirect(`/operator/signin?lang=${lang}`, 303);
    return codeForm(reply, lang, pending.csrf);
  });

  app.post('/operator/signin/code', ROUTE, async (request, reply) => {
    const lang = langOf(request);
    const t = TEXT[lang];
    const body = (request.body ?? {}) as { code?: unknown; csrf?: unknown };
    const pending = await deps.operators.pendingSession(operatorCookie(request));
    if (pending === undefined || !sameOrigin(request) || !deps.operators.csrfMatches(pending, body.csrf))
      return reply.redirect(`/operator/signin?lang=${lang}`, 303);
    const ok = await deps.operators.verifyCode(pending, typeof body.code === 'string' ? body.code : '', request.ip);
    if (typeof ok === 'object')
      return codeForm(reply.header('retry-after', String(ok.throttled)), lang, pending.csrf, {
        status: 429,
        text: t.throttled(ok.throttled),
      });
    if (!ok) return codeForm(reply, lang, pending.csrf, { status: 401, text: t.codeFailed });
    return reply.redirect(`/operator?lang=${lang}`, 303);
  });

  app.post('/operator/signout', ROUTE, async (request, reply) => {
    const lang = langOf(request);
    const cookie = operatorCookie(request);
    const session = await deps.operators.session(cookie);
    const csrf = (request.body as { csrf?: unknown } | undefined)?.csrf;
    if (
      session !== undefined &&
      cookie !== undefined &&
      sameOrigin(request) &&
      deps.operators.csrfMatches(session, csrf)
    )
      await deps.operators.signOut(session, cookie, request.ip);
    return setOperatorCookie(reply, '', 0, deps.secureCookies).redirect(`/operator/signin?lang=${lang}`, 303);
  });

  operatorGet(app, deps, '/operator', async (_request, reply, session, lang) => {
    const t = TEXT[lang];
    const [queue, dead, customers] = await Promise.all([
      deps.operatorConsole.vettingQueue(),
      deps.operatorConsole.deadJobs(),
      deps.operatorConsole.customers(),
    ]);
    const items = [
      ['/operator/customers', t.customers(customers.length)],
      ['/operator/vetting', t.waiting(queue.length)],
      ['/operator/ca', t.ca],
      ['/operator/mail', t.mail],
      ['/operator/jobs', t.dead(dead.length)],
    ];
    return operatorPage(
      reply,
      200,
      lang,
      session,
      '/operator',
      t.overview,
      `<ul>${items.map(([href, text]) => `<li><a href="${href}?lang=${lang}">${escapeHtml(text!)}</a></li>`).join('')}</ul>`,
    );
  });
}
