import type { FastifyReply, FastifyRequest } from 'fastify';

// The frame of every server-rendered page: small, accessible, no script, a strict
// Content-Security-Policy, never cached, never framed.

export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export type Lang = 'en' | 'de';

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
 * redirects to the application's registered URI, which CSP's form-action also governs).
 */
export function page(
  reply: FastifyReply,
  status: number,
  title: string,
  body: string,
  options: { lang?: Lang; formAction?: readonly string[] } = {},
): FastifyReply {
  const formAction = ["'self'", ...(options.formAction ?? [])].join(' ');
  return reply
    .code(status)
    .type('text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('referrer-policy', 'no-referrer')
    .header(
      'content-security-policy',
      `default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action ${formAction}; frame-ancestors 'none'`,
    )
    .header('x-frame-options', 'DENY')
    .header('x-content-type-options', 'nosniff')
    .send(
      `<!doctype html><html lang="${options.lang ?? 'en'}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${escapeHtml(title)}</title>` +
        `<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40em;margin:3em auto;padding:0 1em}button,input{font-size:1em;padding:.5em}label{display:block;margin:.8em 0 .2em}.error{color:#a00}</style></head>` +
        `<body><main><h1>${escapeHtml(title)}</h1>${body}</main></body></html>\n`,
    );
}

/** Whether a form POST comes from one of our own pages: a cross-site Origin or Fetch-Site is refused (CSRF). */
export function sameOrigin(request: FastifyRequest): boolean {
  if (request.headers['sec-fetch-site'] === 'cross-site') return false;
  const origin = request.headers.origin;
  if (origin === undefined || origin === 'null') return origin === undefined;
  try {
    return new URL(origin).host === request.headers.host;
  } catch {
    return false;
  }
}
