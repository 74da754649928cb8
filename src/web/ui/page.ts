import type { FastifyReply, FastifyRequest } from 'fastify';
import { CommitOutcomeUnknown, DatabaseUnavailable } from '../../core/index.js';
import { handleError, logFailure, retryAfter, toCertdeskError } from '../envelope.js';

// The frame of every server-rendered page: small, accessible, a strict Content-Security-Policy
// (no inline script or style), never cached, never framed.

export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export type Lang = 'en' | 'de';

/** A hidden form field (none for an undefined value). */
export const hidden = (name: string, value: string | undefined) =>
  value === undefined ? '' : `<input type="hidden" name="${name}" value="${escapeHtml(value)}">`;

/** The page language: `?lang=` when given, else the first of English or German the browser prefers. */
export function langOf(request: FastifyRequest): Lang {
  const asked = (request.query as { lang?: unknown } | undefined)?.lang;
  if (asked === 'de' || asked === 'en') return asked;
  for (const part of (request.headers['accept-language'] ?? '').split(',')) {
    const tag = part.trim().slice(0, 2).toLowerCase();
    if (tag === 'de' || tag === 'en') return tag;
  }
  return 'en';
}

/**
 * Sends a page. `formAction` lists origins besides our own a form may lead to (the consent form
 * redirects to the application's registered URI, which CSP's form-action also governs); `scripts`
 * are modules of /ui/ the page loads; `nav` (HTML) goes in a header above the main content. The Content-Security-Policy allows no inline script or style:
 * the look is /ui/app.css, behaviour only the named modules, network only our own origin.
 */
export function page(
  reply: FastifyReply,
  status: number,
  title: string,
  body: string,
  options: { lang?: Lang; formAction?: readonly string[]; scripts?: readonly string[]; nav?: string } = {},
): FastifyReply {
  const formAction = ["'self'", ...(options.formAction ?? [])].join(' ');
  const scripts = (options.scripts ?? []).map((s) => `<script type="module" src="/ui/${escapeHtml(s)}"></script>`);
  return reply
    .code(status)
    .type('text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('referrer-policy', 'no-referrer')
    .header(
      'content-security-policy',
      `default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; ` +
        `form-action ${formAction}; frame-ancestors 'none'; base-uri 'none'`,
    )
    .header('x-frame-options', 'DENY')
    .header('x-content-type-options', 'nosniff')
    .send(
      `<!doctype html><html lang="${options.lang ?? 'en'}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">` +
        `<title>${escapeHtml(title)}</title><link rel="stylesheet" href="/ui/app.css">${scripts.join('')}</head>` +
        `<body>${options.nav === undefined ? '' : `<header>${options.nav}</header>`}` +
        `<main><h1>${escapeHtml(title)}</h1>${body}</main></body></html>\n`,
    );
}

/**
 * Whether a form POST comes from one of our own pages: a cross-site Origin or Fetch-Site is refused
 * (CSRF). Chromium sends `Origin: null` for a form on a page with Referrer-Policy no-referrer (every
 * page here); then `Sec-Fetch-Site: same-origin`, a header only the browser sets, must say so.
 */
export function sameOrigin(request: FastifyRequest): boolean {
  const site = request.headers['sec-fetch-site'];
  if (site === 'cross-site' || site === 'same-site') return false;
  const origin = request.headers.origin;
  if (origin === undefined) return true;
  if (origin === 'null') return site === 'same-origin';
  try {
    return new URL(origin).host === request.headers.host;
  } catch {
    return false;
  }
}

const REFUSED = { en: 'This request cannot be answered', de: 'Diese Anfrage kann nicht beantwortet werden' } as const;

/** A page's words for the database out of reach, and for a change whose saving could not be confirmed. */
const UNAVAILABLE = {
  en: {
    title: 'Briefly unavailable',
    retry: 'certdesk cannot reach its database just now. Try again in a few seconds.',
    unknown: 'Whether your change was saved could not be confirmed. Look before you send it again.',
  },
  de: {
    title: 'Vorübergehend nicht erreichbar',
    retry: 'certdesk erreicht seine Datenbank gerade nicht. Versuchen Sie es in einigen Sekunden erneut.',
    unknown:
      'Ob Ihre Änderung gespeichert wurde, ließ sich nicht bestätigen. Prüfen Sie das, bevor Sie sie erneut senden.',
  },
} as const;

/**
 * Route error handler of the server-rendered pages (route option `errorHandler`): data a page
 * cannot take (a NUL character, a body that is neither form nor JSON: `invalidInput` or
 * `malformedRequest`) is answered with a page, 400, as the pages answer other bad input, not with
 * the JSON envelope; the database out of reach, or a COMMIT whose outcome is unknown, with a page,
 * 503. Every other error (413, 429, a fault of ours) goes to `handleError` (§5.1).
 */
export function pageErrorHandler(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const err = toCertdeskError(error);
  if (err instanceof DatabaseUnavailable || err instanceof CommitOutcomeUnknown) {
    // A person at a page is shown a page, not the API's envelope: the same status and Retry-After.
    logFailure(request, err, error, 'page');
    const retry = retryAfter(err, error);
    if (retry !== undefined) void reply.header('retry-after', retry);
    const words = UNAVAILABLE[langOf(request)];
    const text = err instanceof DatabaseUnavailable ? words.retry : words.unknown;
    return page(reply, 503, words.title, `<p class="error" role="alert">${escapeHtml(text)}</p>`, {
      lang: langOf(request),
    });
  }
  if (err.kind !== 'invalidInput' && err.kind !== 'malformedRequest') return handleError(error, request, reply);
  request.log.info({ kind: err.kind, field: err.field }, 'request refused');
  const lang = langOf(request);
  return page(reply, 400, REFUSED[lang], `<p class="error" role="alert">${escapeHtml(err.message)}</p>`, { lang });
}
