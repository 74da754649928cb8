import type { FastifyReply } from 'fastify';
import { escapeHtml as escape, langOf, page, pageErrorHandler, type Lang } from '../ui/page.js';
import type { ApprovalView, EmailApprovals } from '../../ra/dcv/email-approval.js';
import type { App } from '../types.js';

const names = (v: ApprovalView) => `<ul>${v.names.map((n) => `<li><code>${escape(n)}</code></li>`).join('')}</ul>`;

const TEXT = {
  en: {
    invalidTitle: 'Link not valid',
    invalid: 'This approval link is not valid. It may have been replaced by a newer mail.',
    doneTitle: 'Already answered',
    done: (id: number) => `This request for order ${id} needs nothing more from you.`,
    askTitle: 'Approve a certificate',
    asks: (id: number, product: string) => `Order ${id} (${product}) asks for a certificate for:`,
    only: (approver: string) => `Approve only if you, as ${approver}, expect this request.`,
    approve: 'Approve',
    approvedTitle: 'Approved',
    approved: 'Thank you: the certificate for these names may now be issued.',
  },
  de: {
    invalidTitle: 'Link ungültig',
    invalid: 'Dieser Bestätigungslink ist nicht gültig. Vielleicht wurde er durch eine neuere E-Mail ersetzt.',
    doneTitle: 'Bereits beantwortet',
    done: (id: number) => `Diese Anfrage zu Bestellung ${id} braucht nichts mehr von Ihnen.`,
    askTitle: 'Ein Zertifikat bestätigen',
    asks: (id: number, product: string) => `Bestellung ${id} (${product}) beantragt ein Zertifikat für:`,
    only: (approver: string) => `Bestätigen Sie nur, wenn Sie als ${approver} diese Anfrage erwarten.`,
    approve: 'Bestätigen',
    approvedTitle: 'Bestätigt',
    approved: 'Danke: das Zertifikat für diese Namen darf jetzt ausgestellt werden.',
  },
} as const;

/**
 * The confirmation page of EMAIL validation (DESIGN §5.6), in English or German: GET shows the
 * request and a button, only POST approves — mail scanners and link previews follow links, they
 * do not submit forms. The token in the path is the only credential; it is never logged (the
 * request log's URL serializer, log-redaction.ts, shows `/dcv/approve/[redacted]`).
 */
export function registerApprovalPage(app: App, deps: { emailApprovals: EmailApprovals }): void {
  const options = { schema: { hide: true }, config: {}, errorHandler: pageErrorHandler } as const;
  const tokenOk = (t: string) => /^cda_[A-Za-z0-9_-]{20,100}$/.test(t);
  const missing = (reply: FastifyReply, lang: Lang) =>
    page(reply, 404, TEXT[lang].invalidTitle, `<p>${escape(TEXT[lang].invalid)}</p>`, { lang });

  app.get<{ Params: { token: string } }>('/dcv/approve/:token', options, async (request, reply) => {
    const lang = langOf(request);
    const t = TEXT[lang];
    const view = tokenOk(request.params.token) ? await deps.emailApprovals.view(request.params.token) : undefined;
    if (view === undefined) return missing(reply, lang);
    if (view.state !== 'pending')
      return page(reply, 200, t.doneTitle, `<p>${escape(t.done(view.orderId))}</p>`, { lang });
    return page(
      reply,
      200,
      t.askTitle,
      `<p>${escape(t.asks(view.orderId, view.productCode))}</p>${names(view)}` +
        `<p>${escape(t.only(view.approver))}</p>` +
        `<form method="post"><button type="submit">${escape(t.approve)}</button></form>`,
      { lang },
    );
  });

  app.post<{ Params: { token: string } }>('/dcv/approve/:token', options, async (request, reply) => {
    const lang = langOf(request);
    const view = tokenOk(request.params.token)
      ? await deps.emailApprovals.approve(request.params.token, request.ip)
      : undefined;
    if (view === undefined) return missing(reply, lang);
    return page(reply, 200, TEXT[lang].approvedTitle, `<p>${escape(TEXT[lang].approved)}</p>${names(view)}`, { lang });
  });
}
