import type { FastifyReply } from 'fastify';
import QRCode from 'qrcode';
import type { SignIn } from '../../ra/accounts/sign-in.js';
import type { TwoFactor } from '../../ra/accounts/two-factor.js';
import type { App } from '../types.js';
import { escapeHtml, hidden, langOf, page, pageErrorHandler, sameOrigin, type Lang } from './page.js';
import { cookieOf, localPath } from './sign-in.js';

// The second factor in the browser: the code step of signing in (GET/POST /signin/code) and
// enrolment (GET/POST /account/two-factor: a QR code, a first code, ten recovery codes).

const TEXT = {
  en: {
    code: 'Enter your code',
    codeLabel: 'Code from your authenticator app, or a recovery code',
    verify: 'Continue',
    failed: 'Sign-in failed: the code is not right.',
    enrol: 'Two-factor sign-in',
    scan: 'Scan this code with an authenticator app, or enter the key by hand, then enter the code it shows.',
    key: 'Key',
    enabled: 'Two-factor sign-in is on.',
    wrong: 'That code is not right: try the next one.',
    recovery:
      'Keep these recovery codes somewhere safe. Each one signs you in once if your phone is lost. They are shown only now.',
    next: 'Continue',
    throttled: (s: number) => `Too many failed attempts: try again in ${s} s.`,
  },
  de: {
    code: 'Code eingeben',
    codeLabel: 'Code aus Ihrer Authenticator-App oder ein Wiederherstellungscode',
    verify: 'Weiter',
    failed: 'Anmeldung fehlgeschlagen: Der Code stimmt nicht.',
    enrol: 'Anmeldung mit zweitem Faktor',
    scan: 'Scannen Sie diesen Code mit einer Authenticator-App oder geben Sie den Schlüssel von Hand ein, dann den angezeigten Code.',
    key: 'Schlüssel',
    enabled: 'Die Anmeldung mit zweitem Faktor ist aktiv.',
    wrong: 'Dieser Code stimmt nicht: Versuchen Sie den nächsten.',
    recovery:
      'Bewahren Sie diese Wiederherstellungscodes sicher auf. Jeder meldet Sie einmal an, falls Ihr Telefon verloren geht. Sie werden nur jetzt angezeigt.',
    next: 'Weiter',
    throttled: (s: number) => `Zu viele Fehlversuche: Versuchen Sie es in ${s} s wieder.`,
  },
} as const satisfies Record<Lang, Record<string, string | ((s: number) => string)>>;

export function registerTwoFactor(app: App, deps: { signIn: SignIn; twoFactor: TwoFactor }): void {
  const options = { schema: { hide: true }, config: {}, errorHandler: pageErrorHandler } as const;

  const codeForm = (
    reply: FastifyReply,
    lang: Lang,
    next: string,
    csrf: string,
    error?: { status: number; text: string },
  ) => {
    const t = TEXT[lang];
    return page(
      reply,
      error?.status ?? 200,
      t.code,
      (error === undefined ? '' : `<p class="error" role="alert">${escapeHtml(error.text)}</p>`) +
        `<form method="post" action="/signin/code?lang=${lang}">${hidden('next', next)}${hidden('csrf', csrf)}` +
        `<label for="c">${t.codeLabel}</label><input id="c" name="code" autocomplete="one-time-code" inputmode="text" required maxlength="20">` +
        `<p><button type="submit">${t.verify}</button></p></form>`,
      { lang },
    );
  };

  app.get('/signin/code', options, async (request, reply) => {
    const pending = await deps.signIn.pendingSession(cookieOf(request));
    if (pending === undefined) return reply.redirect('/signin', 303);
    const next = localPath((request.query as { next?: unknown }).next);
    return codeForm(reply, langOf(request), next, pending.session.csrf);
  });

  app.post('/signin/code', options, async (request, reply) => {
    const lang = langOf(request);
    const body = (request.body ?? {}) as { code?: unknown; next?: unknown; csrf?: unknown };
    const pending = await deps.signIn.pendingSession(cookieOf(request));
    if (pending === undefined || !sameOrigin(request) || body.csrf !== pending.session.csrf)
      return reply.redirect('/signin', 303);
    const next = localPath(body.next);
    const ok = await deps.twoFactor.verify(pending, typeof body.code === 'string' ? body.code : '', request.ip);
    if (typeof ok === 'object')
      return codeForm(reply.header('retry-after', String(ok.throttled)), lang, next, pending.session.csrf, {
        status: 429,
        text: TEXT[lang].throttled(ok.throttled),
      });
    if (!ok) return codeForm(reply, lang, next, pending.session.csrf, { status: 401, text: TEXT[lang].failed });
    return reply.redirect(next, 303);
  });

  app.get('/account/two-factor', options, async (request, reply) => {
    const lang = langOf(request);
    const t = TEXT[lang];
    const signedIn = await deps.signIn.session(cookieOf(request));
    if (signedIn === undefined) return reply.redirect('/signin?next=%2Faccount%2Ftwo-factor', 303);
    if (signedIn.user.twoFactorEnabled) return page(reply, 200, t.enrol, `<p>${t.enabled}</p>`, { lang });
    const { secret, uri } = await deps.twoFactor.startEnrolment(signedIn);
    const svg = await QRCode.toString(uri, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 });
    const next = localPath((request.query as { next?: unknown }).next);
    return page(
      reply,
      200,
      t.enrol,
      `<p>${t.scan}</p><p><img alt="QR" width="220" height="220" src="data:image/svg+xml;base64,${Buffer.from(svg).toString('base64')}"></p>` +
        `<p>${t.key}: <code>${escapeHtml(secret.replace(/(.{4})/g, '$1 ').trim())}</code></p>` +
        `<form method="post" action="/account/two-factor?lang=${lang}">${hidden('csrf', signedIn.session.csrf)}${hidden('next', next)}` +
        `<label for="c">${TEXT[lang].codeLabel.split(',')[0]}</label><input id="c" name="code" autocomplete="one-time-code" inputmode="numeric" required maxlength="8">` +
        `<p><button type="submit">${t.verify}</button></p></form>`,
      { lang },
    );
  });

  app.post('/account/two-factor', options, async (request, reply) => {
    const lang = langOf(request);
    const t = TEXT[lang];
    const body = (request.body ?? {}) as { code?: unknown; csrf?: unknown; next?: unknown };
    const signedIn = await deps.signIn.session(cookieOf(request));
    if (signedIn === undefined || !sameOrigin(request) || body.csrf !== signedIn.session.csrf)
      return reply.redirect('/signin', 303);
    const codes = await deps.twoFactor.confirmEnrolment(
      signedIn,
      typeof body.code === 'string' ? body.code : '',
      request.ip,
    );
    if (codes === undefined)
      return page(
        reply,
        400,
        t.enrol,
        `<p class="error" role="alert">${t.wrong}</p><p><a href="/account/two-factor?lang=${lang}">${t.enrol}</a></p>`,
        { lang },
      );
    return page(
      reply,
      200,
      t.enrol,
      `<p>${t.enabled}</p><p>${t.recovery}</p><ul>${codes.map((c) => `<li><code>${c}</code></li>`).join('')}</ul>` +
        `<p><a href="${escapeHtml(localPath(body.next))}">${t.next}</a></p>`,
      { lang },
    );
  });
}
